"""The original loader's recovery path, end to end: delete `_bqlock` by hand, upload `_BACKFILL`.

A lock deleted by hand starts at generation 0 again, as the lock of the failed job did; the table
must still resume under a fresh job id, apply the failed batch once the cause is fixed, never apply
a committed batch again, and go on in order.
"""

from __future__ import annotations

import json

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.jobs.inline import InlineRunner
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import skip as skip_ops
from turnstile.protocol import operator
from turnstile.state.execution import read_manifest
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore


def delete_lock_by_hand(host: Host) -> None:
    found = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert found is not None
    host.store.inner.delete(f"{TABLE}/_bqlock", if_generation=found.generation)


def test_deleting_the_lock_and_uploading_backfill_resumes_with_a_fresh_job_applying_each_batch_once(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("a")
    generations = put_all(host, ["a", "b"])
    host.drain()
    failed = host.lock(TABLE)
    assert failed.state is LockState.FAILED and failed.failed_rel == "a"
    assert host.tables.commits.get(TABLE, []) == []
    assert isinstance(host.runner, InlineRunner)
    failed_job = failed.job_id

    # Not fixed yet: the manual recovery runs a new job (not the failed one again), which fails too.
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    second = host.lock(TABLE)
    assert second.state is LockState.FAILED and second.failed_rel == "a"
    assert second.job_id not in (None, failed_job)

    # Fixed: the same recovery applies a, then b, each once, and a later batch follows in order.
    host.tables.failing.clear()
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    generations |= put_all(host, ["c"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "b", "c"])
    assert len(set(host.runner.submitted)) == len(host.runner.submitted)
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE


def test_manual_recovery_after_a_partly_committed_job_never_applies_a_committed_batch_again(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {"START_BACKFILL_FILENAME": "_HISTORYDONE"})
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 3}).encode())
    generations = put_all(host, ["a", "b", "c"])
    host.drain()
    host.tables.failing.add("b")
    host.upload(f"{TABLE}/_HISTORYDONE")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a"])
    assert host.lock(TABLE).failed_rel == "b"

    host.tables.failing.clear()
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "b", "c"])
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE
    assert isinstance(host.runner, InlineRunner)
    assert len(set(host.runner.submitted)) == len(host.runner.submitted) == 2
    # The lock held the position; without it, the result records tell that `a` is applied: the
    # recovery job neither queues nor covers it again.
    recovery = read_manifest(
        host.store, f"gs://{host.bucket}/{TABLE}/_turnstile/jobs/{host.runner.submitted[1]}.manifest.json"
    )
    assert [b.rel for b in recovery.batches] == ["b", "c"]


def events(host: Host, name: str) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == name]


def test_a_lock_deleted_while_its_job_runs_is_not_taken_by_a_second_job(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    generations = put_all(host, ["a", "b"])
    host.drain()
    [running] = host.runner.pending()
    delete_lock_by_hand(host)  # an impatient operator: the original's habit on a long RUNNING lock
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    assert host.runner.pending() == [running]  # no second job while the first may still commit
    [missing] = events(host, "lock_missing")
    assert missing["job_id"] == running
    host.runner.run(running)
    host.drain()  # its done signal wakes the table: the lock is rebuilt at what it applied
    for job in host.runner.pending():
        host.runner.run(job)
        host.drain()
    generations |= put_all(host, ["c"])
    host.drain()
    for job in host.runner.pending():
        host.runner.run(job)
        host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "b", "c"])
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []


def test_a_lock_deleted_while_a_reprocess_job_runs_is_not_taken_by_a_second_one(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED, synchronous=False)
    assert isinstance(host.runner, InlineRunner)
    generations = put_all(host, ["a"])
    host.drain()
    for job in host.runner.pending():
        host.runner.run(job)
        host.drain()
    reprocess_ops.request(invocation(host), f"{TABLE}/a/_SUCCESS", reason="a fixed transform")
    host.drain()
    [running] = host.runner.pending()
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    assert host.runner.pending() == [running]  # its request is still there: a second job would apply it again
    assert [e["job_id"] for e in events(host, "lock_missing")] == [running]
    host.runner.run(running)
    host.drain()
    for job in host.runner.pending():
        host.runner.run(job)
        host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "a"])
    assert host.lock(TABLE).state is LockState.FREE


def test_a_failed_batch_whose_pointer_an_operator_removed_is_dropped_after_the_lock_is_deleted(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The original's ORDERING.md: a batch applied by hand is skipped by removing its `_backlog/`
    object, deleting `_bqlock` and uploading `_BACKFILL`."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("b")
    generations = put_all(host, ["a", "b"])
    host.drain()
    assert host.lock(TABLE).failed_rel == "b"
    host.store.inner.remove(f"{TABLE}/_backlog/b/_SUCCESS")  # "applied by hand"
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    generations |= put_all(host, ["c"])
    host.drain()
    [rebuilt] = events(host, "lock_rebuilt")  # before c is locked for: at a, the last batch applied
    assert rebuilt["rel"] == "a"
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "c"])  # b is not applied again
    assert [e["rel"] for e in events(host, "batch_dropped")] == ["b"]
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []


def test_a_late_batch_whose_pointer_an_operator_removed_stays_out_after_the_lock_is_deleted(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["b", "c"])
    host.drain()
    put_all(host, ["a"])  # late: arrives after c was applied
    host.drain()
    assert host.lock(TABLE).state is LockState.FAILED and host.lock(TABLE).failed_rel == "a"
    host.store.inner.remove(f"{TABLE}/_backlog/a/_SUCCESS")
    delete_lock_by_hand(host)
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    generations |= put_all(host, ["d"])
    host.drain()
    # The rebuilt lock remembers c: a is not pulled in behind d, out of order.
    assert host.tables.commits[TABLE] == commits_in(generations, ["b", "c", "d"])
    assert host.lock(TABLE).position == "d"


def test_unlock_of_a_failed_batch_whose_pointer_was_removed_by_hand_drops_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("b")
    generations = put_all(host, ["a", "b"])
    host.drain()
    host.store.inner.remove(f"{TABLE}/_backlog/b/_SUCCESS")
    done = operator.unlock(invocation(host), table(host), skip_head=False)
    assert done.removed_by_hand and done.dropped_pointer == f"{TABLE}/_backlog/b/_SUCCESS"
    host.drain()
    generations |= put_all(host, ["c"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "c"])
    assert host.lock(TABLE).position == "c"


def test_a_queued_batch_whose_pointer_is_deleted_by_hand_is_queued_again_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """Only a failed batch's record marks a deleted pointer as dropped: any other pointer deleted by
    hand is indistinguishable from a lost event, so the batch is applied, and the log says how to
    skip it instead."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("b")
    generations = put_all(host, ["a", "b", "c", "d"])
    host.drain()
    assert host.lock(TABLE).failed_rel == "b"
    host.store.inner.remove(f"{TABLE}/_backlog/c/_SUCCESS")  # "applied by hand" too: not enough
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=True)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "c", "d"])
    [requeued] = events(host, "batch_requeued")
    assert requeued["rel"] == "c" and requeued["severity"] == "WARNING"
    assert f"turnstile skip gs://{host.bucket}/{TABLE}/c/" in str(requeued["message"])


def test_a_queued_batch_skipped_by_an_operator_is_not_applied_nor_queued_again(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("b")
    generations = put_all(host, ["a", "b", "c", "d"])
    host.drain()
    done = skip_ops.skip(invocation(host), f"{TABLE}/c/_SUCCESS", "applied by hand")
    assert done.pointer == f"gs://{host.bucket}/{TABLE}/_backlog/c/_SUCCESS"
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=True)
    host.drain()
    generations |= put_all(host, ["e"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "d", "e"])
    assert not events(host, "batch_requeued")
    assert [e["rel"] for e in events(host, "batch_dropped")] == ["c"]
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []


@pytest.mark.parametrize("how", ["skip", "unlock --skip-head"])
def test_a_dropped_batch_queued_again_by_a_late_copy_of_its_event_is_not_applied(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, how: str
) -> None:
    """Its pointer is gone, so a copy of its `_SUCCESS` event delivered late creates it again: the
    subscriber finds the drop in the batch's result record and removes the pointer."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.tables.failing.add("b")
    generations = put_all(host, ["a", "b", "c"])
    host.drain()
    dropped = "c" if how == "skip" else "b"
    if how == "skip":
        skip_ops.skip(invocation(host), f"{TABLE}/c/_SUCCESS", "applied by hand")
        host.tables.failing.clear()
        operator.unlock(invocation(host), table(host), skip_head=False)
    else:
        operator.unlock(invocation(host), table(host), skip_head=True)
    host.drain()
    host.deliver(f"{TABLE}/{dropped}/_SUCCESS", generations[dropped])  # the late copy
    assert gcs_store.stat(f"{TABLE}/_backlog/{dropped}/_SUCCESS") is not None  # queued again
    generations |= put_all(host, ["d"])
    host.drain()
    kept = [rel for rel in "abcd" if rel != dropped]
    assert host.tables.commits[TABLE] == commits_in(generations, kept)
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []


def test_the_original_loaders_empty_pointers_are_adopted_and_each_batch_applied_once(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """gcs_ocn_bq_ingest's `_backlog/` objects are empty: the event of their batch adopts them with a
    WARNING instead of rejecting it with advice to upload `_SUCCESS` again (which would apply it twice)."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    for rel in ("a", "b"):
        host.upload(f"{TABLE}/_backlog/{rel}/_SUCCESS", b"")
    generations = put_all(host, ["a", "b"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["a", "b"])
    assert not [r for r in host.log_records() if r["severity"] == "ERROR"]
    adopted = events(host, "pointer_adopted")
    assert adopted and {e["pointer"] for e in adopted} <= {f"{TABLE}/_backlog/{r}/_SUCCESS" for r in "ab"}
    assert all(e["severity"] == "WARNING" for e in adopted)
    assert host.backlog(TABLE) == [] and host.lock(TABLE).state is LockState.FREE
