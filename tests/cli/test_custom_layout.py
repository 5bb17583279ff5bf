"""`status`, `explain`, `backfill` and the table commands find tables and batches where a custom
destination regex puts them (DESTINATION_REGEX, or destinationRegex in `_config/load.json`), as the
function does."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Run, World
from turnstile.config.settings import Settings
from turnstile.names.paths import parse_success
from turnstile.ops import session
from turnstile.protocol import publisher
from turnstile.store.gcs import GcsStore

REGEX = r"^landing/(?P<dataset>[^/]+)/feeds/(?P<table>[^/]+)/(?:(?P<batch>[^/]+)/)?$"
PREFIX = "landing/sales/feeds/orders"


def queue(store: GcsStore, rel: str, regex: str | None) -> int:
    """Upstream writes a batch; its event queues it with the custom layout, as the function would."""
    store.write(f"{PREFIX}/{rel}/part-0.csv", b"id\n1\n")
    generation = store.write(f"{PREFIX}/{rel}/_SUCCESS", b"")
    batch = parse_success(store.bucket, f"{PREFIX}/{rel}/_SUCCESS", regex)
    inv = session.invocation(store, Settings.from_env({"DESTINATION_REGEX": REGEX}))
    publisher.publish(inv, batch, generation)
    return generation


def tables(run: Run, uri: str) -> dict[str, dict[str, object]]:
    result = run("status", uri, "--output", "json")
    assert result.exit_code in (0, 1), result.output
    return {t["table"]: t for t in json.loads(result.stdout)["tables"]}


@pytest.mark.parametrize("where", ["env", "load.json", "landing/_config/load.json"])
def test_status_explain_and_backfill_follow_a_custom_regex(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    store = world.store
    if where == "env":
        monkeypatch.setenv("DESTINATION_REGEX", REGEX)
    else:  # in the bucket root's config, or only in the config of the folder above the datasets
        config = "_config/load.json" if where == "load.json" else where
        store.write(config, json.dumps({"destinationRegex": REGEX}).encode())
    store.write(f"{PREFIX}/_config/ORDERME", b"")
    queue(store, "b1", REGEX)
    bucket = f"gs://{store.bucket}"
    for uri in (bucket, f"{bucket}/landing", f"{bucket}/landing/sales", f"{bucket}/{PREFIX}"):
        found = tables(run, uri)
        assert list(found) == ["sales.orders"], uri
        assert found["sales.orders"]["backlog_depth"] == 1
        assert found["sales.orders"]["backlog_head"] == "b1"

    explained = run("explain", f"{bucket}/{PREFIX}/_backlog/b1/_SUCCESS", "--output", "json")
    assert explained.exit_code == 0, explained.output
    if where == "env":  # a state object is read by its name alone: the environment's regex
        described = json.loads(explained.stdout)
        assert (described["table"], described["table_prefix"]) == ("sales.orders", PREFIX)

    store.write(f"{PREFIX}/b2/part-0.csv", b"id\n2\n")
    store.write(f"{PREFIX}/b2/_SUCCESS", b"")  # its event never came
    filled = run("backfill", f"{bucket}/landing", "--output", "json")
    assert filled.exit_code == 0, filled.output
    assert json.loads(filled.stdout)["counts"] == {"already handled": 1, "queued": 1}
    assert store.stat(f"{PREFIX}/_backlog/b2/_SUCCESS") is not None
    assert tables(run, f"{bucket}/{PREFIX}")["sales.orders"]["backlog_depth"] == 2


def test_table_commands_take_a_custom_regex_table(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DESTINATION_REGEX", REGEX)
    store = world.store
    store.write(f"{PREFIX}/2024/05/01/13/part-0.csv", b"id\n1\n")
    paused = run("pause", f"gs://{store.bucket}/{PREFIX}")
    assert paused.exit_code == 0, paused.output
    assert store.stat(f"{PREFIX}/_turnstile/paused.json") is not None
    wrong = run("pause", f"gs://{store.bucket}/landing/sales")
    assert wrong.exit_code == 2
    assert "is not a table prefix of the destination regex" in wrong.stderr


def test_a_destination_regex_in_a_folders_load_json_with_a_required_batch_finds_the_table(
    run: Run, world: World
) -> None:
    """gcs_ocn_bq_ingest regexes have no optional groups: the batch folder is required."""
    store = world.store
    regex = r"^landing/(?P<dataset>[\w]+)/(?P<table>[\w]+)/(?P<batch>[\w]+)/"
    store.write("landing/_config/load.json", json.dumps({"destinationRegex": regex}).encode())
    store.write("landing/ds5/ord/_config/ORDERME", b"")
    store.write("landing/ds5/ord/b1/p.csv", b"id\n1\n")
    generation = store.write("landing/ds5/ord/b1/_SUCCESS", b"")
    batch = parse_success(store.bucket, "landing/ds5/ord/b1/_SUCCESS", regex)
    assert batch.table.prefix == "landing/ds5/ord"
    publisher.publish(
        session.invocation(store, Settings.from_env({"DESTINATION_REGEX": regex})), batch, generation
    )
    bucket = f"gs://{store.bucket}"
    for uri in (f"{bucket}/landing", f"{bucket}/landing/ds5/ord"):
        found = tables(run, uri)
        assert list(found) == ["ds5.ord"], uri
        assert found["ds5.ord"]["backlog_head"] == "b1"
    history = run("history", f"{bucket}/landing/ds5/ord")
    assert history.exit_code == 0, history.output
