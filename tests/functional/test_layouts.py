"""Table layouts end to end: every state object sits at the table prefix the layout names, at any
depth, for the default layout, a project-qualified dataset folder and a custom destination regex
(the DESTINATION_REGEX setting, or a `destinationRegex` in a folder's `_config/load.json`).

Each case drives functions/main.py through real CloudEvents on fake-gcs-server (harness.py):
ordered batches are queued, locked, applied in order, their pointers removed, the job's done signal
handled, and `_BACKFILL` (the manual restart) and `_HISTORYDONE` (the gate) act on that table.
"""

from __future__ import annotations

import json

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import invocation
from turnstile.names.paths import Table
from turnstile.protocol import sweeper
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore

# The dataset is not the table's parent folder: only the regex's groups say which folder is which.
CUSTOM_REGEX = r"^landing/(?P<dataset>[^/]+)/feeds/(?P<table>[^/]+)/(?:(?P<batch>[^/]+)/)?$"

LAYOUTS = {
    "default": ("ds/tbl", "ds", "tbl", {}),
    "project-qualified": ("my-proj.sales/orders", "sales", "orders", {}),
    "custom-regex": ("landing/sales/feeds/orders", "sales", "orders", {"DESTINATION_REGEX": CUSTOM_REGEX}),
    "load-json-regex": ("landing/sales/feeds/orders", "sales", "orders", {}),
}
# The same custom layout, said by the `_config/load.json` of the folder above the datasets.
LOAD_JSON_REGEX = {"landing/_config/load.json": {"destinationRegex": CUSTOM_REGEX}}


def start(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, env: dict[str, str], layout: str = ""
) -> Host:
    host = start_host(monkeypatch, gcs_store, {"ORDER_PER_TABLE": "true"} | env)
    for name, config in (LOAD_JSON_REGEX if layout == "load-json-regex" else {}).items():
        host.upload(name, json.dumps(config).encode())
    return host


def pointers(host: Host, prefix: str) -> list[str]:
    return [o.name for o in host.store.inner.list_objects(f"{prefix}/_backlog/")]


def rejected(host: Host) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == "rejected"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ordered_batches_of_each_layout_are_queued_locked_applied_and_released_at_its_prefix(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, layout: str
) -> None:
    prefix, dataset, table, env = LAYOUTS[layout]
    host = start(monkeypatch, gcs_store, env, layout)
    generations = {rel: host.put_batch(f"{prefix}/{rel}") for rel in ("b1", "b2")}
    host.drain()
    assert host.tables.commits[prefix] == [("b1", generations["b1"]), ("b2", generations["b2"])]
    assert pointers(host, prefix) == []
    lock = host.lock(prefix)
    assert lock.state is LockState.FREE and lock.position == "b2"
    assert host.store.inner.stat(f"{prefix}/_BACKFILL") is None
    done = [(n, status) for n, _, status in host.delivered if n.endswith(".done")]
    assert done and all(n.startswith(f"{prefix}/_turnstile/jobs/") and status < 400 for n, status in done)
    assert rejected(host) == []
    # The manifest names the Iceberg identity: the dataset part of a `project.dataset` folder.
    manifests = host.store.inner.list_objects(f"{prefix}/_turnstile/jobs/")
    assert any(m.name.endswith(".manifest.json") for m in manifests)
    found = Table(host.bucket, prefix, dataset, table)
    assert found in sweeper.tables(invocation(host))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_backfill_uploaded_at_the_table_prefix_restarts_that_table(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, layout: str
) -> None:
    prefix, _, _, env = LAYOUTS[layout]
    host = start(monkeypatch, gcs_store, env, layout)
    host.tables.failing.add("b1")
    host.put_batch(f"{prefix}/b1")
    host.drain()
    assert host.lock(prefix).state is LockState.FAILED
    host.tables.failing.clear()
    found = host.store.inner.stat(f"{prefix}/_bqlock")
    assert found is not None
    host.store.inner.delete(f"{prefix}/_bqlock", if_generation=found.generation)
    host.upload(f"{prefix}/_BACKFILL")
    host.drain()
    assert host.tables.applied_rels(prefix) == ["b1"]
    assert host.lock(prefix).state is LockState.FREE
    assert rejected(host) == []


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_history_gate_at_the_table_prefix_releases_that_table(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, layout: str
) -> None:
    prefix, _, _, env = LAYOUTS[layout]
    host = start(monkeypatch, gcs_store, env | {"START_BACKFILL_FILENAME": "_HISTORYDONE"}, layout)
    host.put_batch(f"{prefix}/b2")
    host.put_batch(f"{prefix}/b1")
    host.drain()
    assert host.tables.commits.get(prefix, []) == []
    assert len(pointers(host, prefix)) == 2
    host.upload(f"{prefix}/_HISTORYDONE")
    host.drain()
    assert host.tables.applied_rels(prefix) == ["b1", "b2"]
    assert pointers(host, prefix) == []
    assert rejected(host) == []


# gcs_ocn_bq_ingest's default regex is not anchored at its end: a `_SUCCESS` in a folder below the
# batch id is a batch of the table too, whose rel is its whole folder below the table prefix.
DEEP = ("foo/bar/baz", "2024/05/01/13/b1/extra", "historical/2024/b1/x/y", "$2024050113/b1/x")


def test_a_success_in_folders_below_the_batch_id_is_applied_as_a_batch_of_the_table(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    generation = host.put_batch("ds/tbl/foo/bar/baz")
    host.drain()
    assert host.tables.commits["ds/tbl"] == [("foo/bar/baz", generation)]
    assert rejected(host) == []


def test_ordered_batches_in_folders_below_their_batch_ids_queue_and_apply_in_pointer_order(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    generations = {rel: host.put_batch(f"ds/tbl/{rel}") for rel in DEEP}
    # Spark's own `_SUCCESS` in its scratch folder, and one under a `_config/`: never batches.
    host.upload("ds/tbl/foo/bar/_temporary/0/_SUCCESS")
    host.upload("ds/tbl/foo/_config/bar/_SUCCESS")
    host.drain()
    assert sorted(pointers(host, "ds/tbl")) == sorted(f"ds/tbl/_backlog/{rel}/_SUCCESS" for rel in DEEP)
    assert host.tables.commits.get("ds/tbl", []) == []
    host.upload("ds/tbl/_HISTORYDONE")
    host.drain()
    order = sorted(DEEP, key=lambda rel: f"ds/tbl/_backlog/{rel}/_SUCCESS")
    assert host.tables.commits["ds/tbl"] == [(rel, generations[rel]) for rel in order]
    assert pointers(host, "ds/tbl") == []
    assert rejected(host) == []
