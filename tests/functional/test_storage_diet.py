"""The ordered path's storage-operation diet, through functions/main.py and real CloudEvents on
fake-gcs-server: a `_SUCCESS` event is queued without a stat, the subscriber takes each covered
batch's live generation from its listing instead of reading pointers, and stale or deleted
`_SUCCESS` generations still apply exactly once or not at all."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, put_all
from turnstile.state.records import LockState, Manifest
from turnstile.store.gcs import GcsStore


class NamedOps:
    """The GCS store, counting each stat, read and listing by the name or prefix it names."""

    def __init__(self, inner: GcsStore) -> None:
        self.inner = inner
        self.stats: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.listed: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stat(self, name: str) -> Any:
        self.stats[name] += 1
        return self.inner.stat(name)

    def read(self, name: str) -> Any:
        self.reads[name] += 1
        return self.inner.read(name)

    def list_objects(self, prefix: str, **options: Any) -> Any:
        self.listed[prefix] += 1
        return self.inner.list_objects(prefix, **options)

    def list_entries(self, prefix: str, **options: Any) -> Any:
        self.listed[prefix] += 1
        return self.inner.list_entries(prefix, **options)


@pytest.fixture
def counted(gcs_store: GcsStore) -> NamedOps:
    return NamedOps(gcs_store)


@pytest.fixture
def ordered_host(monkeypatch: pytest.MonkeyPatch, counted: NamedOps) -> Host:
    return start_host(monkeypatch, counted, ORDERED)  # type: ignore[arg-type]


def assert_drained(host: Host) -> None:
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE


def test_ordered_batches_are_applied_without_a_stat_of_success_or_a_read_of_a_pointer(
    ordered_host: Host, counted: NamedOps
) -> None:
    rels = [f"{n:02d}" for n in range(1, 7)]
    generations = put_all(ordered_host, rels)
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [(rel, generations[rel]) for rel in rels]
    assert_drained(ordered_host)
    assert not [name for name in counted.stats if name.endswith("/_SUCCESS")]
    assert not [name for name in counted.reads if "/_backlog/" in name]


def test_a_stale_success_event_applies_the_live_generation_once(ordered_host: Host) -> None:
    """`_SUCCESS` is overwritten before its first event is handled: both events queue the same
    pointer, the job applies the live generation, and the old event redelivered later applies
    nothing (the live generation's result record says it is committed)."""
    first = ordered_host.put_batch(f"{TABLE}/01")
    second = ordered_host.put_batch(f"{TABLE}/01")
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [("01", second)]
    assert_drained(ordered_host)
    assert ordered_host.deliver(f"{TABLE}/01/_SUCCESS", first) == 200
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [("01", second)]
    assert_drained(ordered_host)


def test_a_stale_event_of_a_batch_behind_the_position_applies_nothing(ordered_host: Host) -> None:
    generations = put_all(ordered_host, ["01", "02"])
    ordered_host.drain()
    assert ordered_host.deliver(f"{TABLE}/01/_SUCCESS", generations["01"]) == 200  # a duplicate, late
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [("01", generations["01"]), ("02", generations["02"])]
    assert_drained(ordered_host)


def test_a_success_deleted_before_its_batch_is_applied_is_dropped_and_the_rest_applies(
    ordered_host: Host, counted: NamedOps
) -> None:
    generations = put_all(ordered_host, ["01", "02"])
    counted.inner.delete(f"{TABLE}/01/_SUCCESS", if_generation=generations["01"])
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [("02", generations["02"])]
    assert_drained(ordered_host)


def manifests(host: Host) -> list[Manifest]:
    folder = f"{TABLE}/_turnstile/jobs/"
    found = [o for o in host.store.inner.list_objects(folder) if o.name.endswith(".manifest.json")]
    return [Manifest.decode(o.data, o.name) for o in map(host.store.inner.read, (f.name for f in found)) if o]


def test_a_batch_folder_config_is_applied_though_the_handler_never_lists_it(
    ordered_host: Host, counted: NamedOps
) -> None:
    """The levels above make the table ordered, so the `_SUCCESS` event does not list the batch
    folder's own `_config/`; the subscriber's listing shows it, and the job gets its options."""
    ordered_host.upload(
        f"{TABLE}/02/_config/load.json", json.dumps({"reader_options": {"sep": ";"}}).encode()
    )
    generations = put_all(ordered_host, ["01", "02", "03"])
    ordered_host.drain()
    assert ordered_host.tables.commits[TABLE] == [(rel, generations[rel]) for rel in ["01", "02", "03"]]
    options = {b.rel: b.load.reader_options for m in manifests(ordered_host) for b in m.batches}
    assert options == {"01": {}, "02": {"sep": ";"}, "03": {}}
    batch_levels = [prefix for prefix in counted.listed if prefix.startswith(f"{TABLE}/0")]
    # The job's head (its config caps the job) and the one folder the listing showed a config in;
    # never 03, whose own level the subscriber's listing showed empty.
    assert sorted(batch_levels) == [f"{TABLE}/01/_config/", f"{TABLE}/02/_config/"]
    assert counted.listed[f"{TABLE}/01/_config/"] == counted.listed[f"{TABLE}/02/_config/"] == 1


def test_a_batch_folder_config_that_moves_the_batch_to_another_table_blocks_with_a_clear_error(
    ordered_host: Host,
) -> None:
    moved = {"destinationRegex": "^(?P<dataset>[^/]+)/[^/]+/(?P<table>[^/]+)/$"}  # table `b01`
    ordered_host.upload(f"{TABLE}/b01/_config/load.json", json.dumps(moved).encode())
    ordered_host.put_batch(f"{TABLE}/b01")
    ordered_host.drain()
    assert ordered_host.tables.commits == {}
    lock = ordered_host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "b01"
    assert lock.error is not None and "not supported for ordered batches" in lock.error


def test_a_further_batch_in_a_job_costs_four_storage_operations(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The marginal cost of one more batch in a job, from two tables that differ only in how many
    batches queue behind the gate before one job takes them all: the publisher's gate stat and
    pointer create, the job's result record and the pointer's removal. No stat of `_SUCCESS`, no
    pointer read, no listing of the batch folder's `_config/` (each one per batch before)."""
    host = start_host(monkeypatch, gcs_store, ORDERED | {"START_BACKFILL_FILENAME": "_GO"})
    host.upload("ds/_config/load.json", json.dumps({"max_batches_per_job": 100}).encode())

    def run(table: str, batches: int) -> int:
        before = sum(host.store.ops.values())
        generations = {rel: host.put_batch(f"{table}/{rel}") for rel in (f"{n:02d}" for n in range(batches))}
        host.drain()
        host.upload(f"{table}/_GO")
        host.drain()
        assert host.tables.commits[table] == sorted(generations.items())
        return sum(host.store.ops.values()) - before - (2 * batches + 1)  # upstream's own writes

    run("ds/warm", 3)  # the upper config levels are read once per function instance
    jobs = len(host.runner.submitted)  # type: ignore[attr-defined]
    ten, twenty = run("ds/ten", 10), run("ds/twenty", 20)
    assert len(host.runner.submitted) == jobs + 2  # type: ignore[attr-defined]
    assert (twenty - ten) / 10 == 4
