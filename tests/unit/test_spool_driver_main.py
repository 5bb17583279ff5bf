"""The warm driver's main file, short of Spark: its arguments, the spool store each cloud gets, and
a request whose manifest is not in the spool's cloud."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from turnstile.config.settings import Settings
from turnstile.entrypoints import spool_driver
from turnstile.state.spoolrecords import Outcome, SpoolRequest
from turnstile.store.gcs import GcsStore
from turnstile.store.s3 import S3Store


def test_the_store_argument_picks_the_spools_cloud() -> None:
    needed = ["--spool-bucket", "b", "--driver-id", "d"]
    args = spool_driver.arguments([*needed, "--store", "s3", "--prices", "emr"])
    assert (args.store, args.prices) == ("s3", "emr")
    assert spool_driver.arguments(needed).store == "gcs"
    with pytest.raises(SystemExit):
        spool_driver.arguments([*needed, "--store", "azure"])


def test_the_spool_store_is_s3s_or_gcss() -> None:
    local = {"STORAGE_EMULATOR_HOST": "http://127.0.0.1:1"}  # no credentials needed
    settings = Settings.from_env({"AWS_REGION": "eu-west-1", "GOOGLE_CLOUD_PROJECT": "p", **local})
    assert isinstance(spool_driver.spool_store(settings, "s3", "lake"), S3Store)
    assert isinstance(spool_driver.spool_store(settings, "gcs", "lake"), GcsStore)


@pytest.mark.parametrize(
    ("scheme", "manifest"), [("s3", "gs://b/t/_turnstile/jobs/j.json"), ("gs", "s3://b/x")]
)
def test_a_request_whose_manifest_is_in_another_cloud_fails_with_its_name(
    scheme: str, manifest: str, tmp_path: Path
) -> None:
    request = SpoolRequest(
        job_id="j", table="t", submitted_at=datetime(2026, 6, 1, tzinfo=UTC), body={"manifest": manifest}
    )
    outcome, error = spool_driver.run_request(None, request, None, tmp_path, scheme=scheme)  # type: ignore[arg-type]
    assert outcome is Outcome.FAILED
    assert error == f"request of job j names no {scheme}:// manifest: {manifest!r}"
