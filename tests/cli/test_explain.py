"""`turnstile explain`: a name read as turnstile reads it; storage only for a batch's config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run, one_error_line
from turnstile.config.settings import Settings
from turnstile.entrypoints import wiring
from turnstile.local import emulator as emu
from turnstile.local.stackinfo import StackInfo
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.port import ObjectStore

SUCCESS = "sales/orders/incremental/2024/05/01/13/_SUCCESS"


@pytest.fixture
def nowhere(stack: StackInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No local stack, no emulator and no Google credentials anywhere google-auth looks (after
    `stack`, which `run` uses, so that its TURNSTILE_HOME is replaced)."""
    del stack
    monkeypatch.setenv("TURNSTILE_HOME", str(tmp_path))  # no stack.json there
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))  # no application-default login
    monkeypatch.setenv("NO_GCE_CHECK", "True")  # not on Google Cloud: no metadata server


def test_a_three_character_bucket_and_its_config_through_the_stack(
    run: Run, gcs_emulator: emu.Emulator
) -> None:
    gcs_emulator.create_bucket("abc")
    GcsStore(make_client("local", gcs_emulator.url), "abc").write("sales/orders/_config/ORDERME", b"")
    result = run("explain", f"gs://abc/{SUCCESS}", "-o", "json")
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    assert (described["object"], described["table"], described["rel"]) == (
        f"gs://abc/{SUCCESS}",
        "sales.orders",
        "incremental/2024/05/01/13",
    )
    assert (described["ordered"], described["config_read"]) == (True, True)
    assert described["config_sources"] == ["sales/orders/_config/ORDERME"]
    assert "config_note" not in described


def test_a_batch_finer_than_its_natural_time_shows_the_period_it_is_given(
    run: Run, gcs_emulator: emu.Emulator
) -> None:
    gcs_emulator.create_bucket("dly")
    GcsStore(make_client("local", gcs_emulator.url), "dly").write(
        "sales/orders/_config/load.json", b'{"natural_time": "daily"}'
    )
    described = json.loads(run("explain", f"gs://dly/{SUCCESS}", "-o", "json").stdout)
    assert described["period"] == "2024-05-01T00:00:00+00:00 to 2024-05-02T00:00:00+00:00"
    assert described["period_note"].startswith("the batch is finer than natural_time")
    whole_day = json.loads(run("explain", "gs://dly/sales/orders/2024/05/01/_SUCCESS", "-o", "json").stdout)
    assert whole_day["period"] == described["period"] and "period_note" not in whole_day


@pytest.mark.usefixtures("nowhere")
def test_a_state_object_needs_no_stack_and_no_credentials(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_client(settings: Settings, bucket: str) -> ObjectStore:
        raise AssertionError(f"explain built a storage client for gs://{bucket}")

    monkeypatch.setattr(wiring, "object_store", no_client)
    result = run("explain", "gs://abc/sales/orders/_bqlock", "-o", "json")
    assert result.exit_code == 0, result.output  # a storage client would have wanted credentials
    described = json.loads(result.stdout)
    assert (described["kind"], described["table"], described["config_read"]) == (
        "lock",
        "sales.orders",
        False,
    )
    assert described["config_note"] == (
        "not read: a lock object has no load config (nothing was read from storage)"
    )
    text = run("explain", "gs://abc/sales/orders/_config/load.json").stdout
    assert "config_note  not read: this is a _config/ file itself; turnstile validate checks it" in text


@pytest.mark.usefixtures("nowhere")
def test_a_batch_without_credentials_is_explained_from_its_name_and_says_its_config_was_not_read(
    run: Run,
) -> None:
    result = run("explain", f"gs://abc/{SUCCESS}")
    assert result.exit_code == 0, result.output
    rows = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert (rows["kind"], rows["table"], rows["rel"]) == (
        "success",
        "sales.orders",
        "incremental/2024/05/01/13",
    )
    assert rows["natural_time"] == "2024-05-01T13:00:00+00:00"
    assert rows["config_read"] == "False"
    assert rows["config_note"].startswith("not read: no Google credentials to read gs://abc")
    assert "gcloud auth application-default login" in rows["config_note"]
    assert "ordered" not in rows and "mode" not in rows  # unknown without the config, so not guessed
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("gs://abc", "gs://abc names a bucket, not an object; pass gs://BUCKET/OBJECT"),
        (
            "gs://ab/sales/orders/_bqlock",
            "'gs://ab/sales/orders/_bqlock' is not a gs://BUCKET[/PATH] URI",
        ),
        ("abc/sales/orders/_bqlock", "is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI"),
        (f"gs://abc/sales/or-ders/{SUCCESS[13:]}", "table name 'or-ders' is not allowed"),
        (
            "gs://abc/sales/orders",
            "error: gs://abc/sales/orders names no object of a batch; if it is a folder, it is table "
            "sales.orders: explain an object in it, e.g. gs://abc/sales/orders/<batch>/_SUCCESS (as an",
        ),
    ],
)
@pytest.mark.usefixtures("nowhere")
def test_a_bad_name_is_one_error_line(run: Run, uri: str, message: str) -> None:
    result = run("explain", uri, "-o", "json")
    assert result.exit_code == 2
    assert message in one_error_line(result)
    assert result.stdout == ""
