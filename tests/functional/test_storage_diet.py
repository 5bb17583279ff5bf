"""The ordered path's storage-operation diet, through functions/main.py and real CloudEvents on
fake-gcs-server: a `_SUCCESS` event is queued without a stat, the subscriber takes each covered
batch's live generation from its listing instead of reading pointers, and stale or deleted
`_SUCCESS` generations still apply exactly once or not at all."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, put_all
from turnstile.records import LockState
from turnstile.store.gcs import GcsStore


class NamedOps:
    """The GCS store, counting each stat and read by the object it names."""

    def __init__(self, inner: GcsStore) -> None:
        self.inner = inner
        self.stats: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stat(self, name: str) -> Any:
        self.stats[name] += 1
        return self.inner.stat(name)

    def read(self, name: str) -> Any:
        self.reads[name] += 1
        return self.inner.read(name)


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
