"""`turnstile reprocess`: a committed batch applied once more, on request, in order with the backlog,
exactly once, and recorded as such in the history next to its original commit."""

from __future__ import annotations

import random

import pytest

from tests.functional.harness import start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.names.paths import Table
from turnstile.ops import history as history_ops
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops.errors import Refused
from turnstile.protocol import operator
from turnstile.protocol import reprocess as requests
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore
from turnstile.store.port import ObjectStore


def success(rel: str) -> str:
    return f"{TABLE}/{rel}/_SUCCESS"


def outcomes(store: ObjectStore, of: Table) -> list[tuple[str, str]]:
    found = history_ops.history(store, of, success_filename="_SUCCESS", last=None)
    return [(e.rel, e.outcome) for e in found.entries]


def test_reprocess_goes_after_what_was_queued_before_it_and_is_recorded(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["01", "02"])
    host.drain()
    operator.pause(invocation(host), table(host))
    generations |= put_all(host, ["03"])
    host.drain()
    done = reprocess_ops.request(invocation(host), success("01"), reason="a fixed transform")
    assert (done.rel, done.generation, done.queued_after) == ("01", generations["01"], "03")
    generations |= put_all(host, ["04"])  # queued after the request: applied after it
    host.drain()
    assert host.applied(TABLE) == ["01", "02"]  # paused: nothing moves, the request waits too
    operator.resume(invocation(host), table(host))
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03", "01", "04"])
    assert host.store.inner.list_objects(requests.folder(table(host))) == []  # the request is used up
    lock = host.lock(TABLE)
    assert lock.state is LockState.FREE and lock.position == "04"
    assert outcomes(host.store, table(host)) == [
        ("01", "COMMITTED"),
        ("01", "REPROCESSED"),
        ("02", "COMMITTED"),
        ("03", "COMMITTED"),
        ("04", "COMMITTED"),
    ]
    [reprocessed] = [r for r in host.log_records() if r.get("event") == "reprocess_started"]
    assert reprocessed["rel"] == "01"


def test_duplicated_and_reordered_events_apply_each_request_exactly_once(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["01", "02"])
    host.drain()
    reprocess_ops.request(invocation(host), success("02"))
    reprocess_ops.request(invocation(host), success("02"))  # asked twice: applied twice, no more
    host.drain(rng=random.Random(7), duplicates=0.5)
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "02", "02"])
    host.drain(rng=random.Random(8), duplicates=0.5)
    for name, generation, _ in list(host.delivered):  # every event delivered again, late
        host.deliver(name, generation)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "02", "02"])
    assert [o for _, o in outcomes(host.store, table(host))].count("REPROCESSED") == 2


def test_a_failed_reprocess_blocks_the_table_until_unlock_and_then_applies_once(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["01"])
    host.drain()
    host.tables.failing.add("01")  # the batch's data went bad since: the reprocess fails
    reprocess_ops.request(invocation(host), success("01"))
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "01"
    assert ("01", "FAILED") in outcomes(host.store, table(host))
    with pytest.raises(Refused, match="unlock the table first"):
        reprocess_ops.request(invocation(host), success("01"))
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "01"])
    assert host.lock(TABLE).state is LockState.FREE and host.lock(TABLE).position == "01"


def test_unlock_with_skip_head_drops_a_failed_reprocess_request(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["01", "02"])
    host.drain()
    host.tables.failing.add("01")
    reprocess_ops.request(invocation(host), success("01"))
    host.drain()
    operator.unlock(invocation(host), table(host), skip_head=True)
    generations |= put_all(host, ["03"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert host.lock(TABLE).position == "03"  # not moved back to the dropped request's batch
    assert host.store.inner.list_objects(requests.folder(table(host))) == []


def test_a_batch_never_committed_or_not_there_is_refused_and_nothing_is_written(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    operator.pause(invocation(host), table(host))
    put_all(host, ["01"])
    host.drain()
    with pytest.raises(Refused, match=r"never committed.*turnstile status.*wait"):
        reprocess_ops.request(invocation(host), success("01"))
    with pytest.raises(Refused, match=r"does not exist: there is no batch to reprocess"):
        reprocess_ops.request(invocation(host), success("09"))
    assert host.store.inner.list_objects(requests.folder(table(host))) == []


def test_an_unordered_table_is_reprocessed_as_one_more_apply(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    generations = put_all(host, ["01", "02"])
    host.drain()
    reprocess_ops.request(invocation(host), success("01"))
    host.drain(rng=random.Random(3), duplicates=0.5)
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "01"])
    assert ("01", "REPROCESSED") in outcomes(host.store, table(host))
    assert host.store.inner.stat(f"{TABLE}/_bqlock") is None  # it still looks unordered
