"""A source period committed after a derived table's step already read it: the step is rebuilt once
(a reprocess request of the step made by the protocol, its cause recorded), or, for an `append`
table, recorded as STALE with an alert and the command that fixes it.

Real CloudEvents through functions/main.py on fake-gcs-server (harness.py) and the in-process
runner, as in test_gaps.py.
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.functional.harness import Host
from tests.functional.scenario import invocation
from tests.functional.test_dependencies import HOURLY, arrive, configure, rel
from tests.functional.test_gaps import sensors
from tests.functional.test_sweeper import ManualClock
from turnstile.config.settings import Settings
from turnstile.core.errors import BatchFailed
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner, MemoryTables
from turnstile.jobs.port import JobState, JobStatus
from turnstile.names.paths import Table
from turnstile.ops import history as history_ops
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import status as status_ops
from turnstile.protocol import lock as lock_io
from turnstile.protocol import operator, rebuilds, sweeper
from turnstile.protocol import reprocess as requests
from turnstile.protocol.context import Invocation
from turnstile.state.execution import read_manifest
from turnstile.state.records import BatchResult, CoveredBatch, Lock, LockState, ManifestBatch

IGNORE = HOURLY | {"gaps": "ignore"}
STEPS = {"derived": {"step": "1h", "start": "2026-01-01T10:00:00Z"}}
MART = STEPS | {"depends_on": ["ds.sensors"], "mode": "overwrite_partitions", "partition_by": ["hours(ts)"]}


def table_of(host: Host, prefix: str) -> Table:
    return Table(host.bucket, prefix, *prefix.split("/"))


def marts(host: Host, mart: dict[str, object] = MART, *, top: bool = False) -> None:
    configure(host, "ds/sensors", IGNORE)
    configure(host, "ds/mart", mart, ordered=False)
    if top:
        configure(host, "ds/top", MART | {"depends_on": ["ds.mart"]}, ordered=False)
    sweeper.sweep(invocation(host))  # registers the derived tables with their sources


def late_hour_11(host: Host) -> None:
    """Hours 10 and 12 land, the mart builds 10, 11 (empty) and 12; then hour 11 lands late and
    an operator lets it through."""
    arrive(host, "ds/sensors", 10, 12)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    arrive(host, "ds/sensors", 11)
    assert host.lock("ds/sensors").state is LockState.FAILED  # a late batch stops the source
    operator.unlock(invocation(host), sensors(host), skip_head=False)


def events(host: Host, name: str) -> list[dict[str, Any]]:
    return [r for r in host.log_records() if r.get("event") == name]


def entries(host: Host, prefix: str) -> list[tuple[str, str]]:
    found = history_ops.history(host.store, table_of(host, prefix), success_filename="_SUCCESS", last=None)
    return [(e.rel, e.outcome) for e in found.entries]


def rebuilt(host: Host, prefix: str) -> list[history_ops.Entry]:
    found = history_ops.history(host.store, table_of(host, prefix), success_filename="_SUCCESS", last=None)
    return [e for e in found.entries if e.outcome == "REBUILT"]


def test_a_late_source_hour_rebuilds_the_step_that_read_it_once(host: Host) -> None:
    marts(host)
    late_hour_11(host)
    host.drain(rng=random.Random(3), duplicates=0.5)  # every finish may be handled twice
    for name, generation, _ in list(host.delivered):  # and every event delivered again, late
        host.deliver(name, generation)
    host.drain()
    assert host.applied("ds/sensors") == [rel(10), rel(12), rel(11)]
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    assert len(events(host, "rebuild_requested")) == 1
    assert host.store.inner.list_objects(requests.folder(table_of(host, "ds/mart"))) == []
    [entry] = rebuilt(host, "ds/mart")
    source_result = history_ops.history(host.store, sensors(host), success_filename="_SUCCESS", last=None)
    [committed] = [e for e in source_result.entries if e.rel == rel(11)]
    assert entry.rel == rel(11) and entry.cause is not None
    assert entry.cause["table"] == "ds/sensors" and entry.cause["rel"] == rel(11)
    assert entry.cause["success_generation"] == committed.generation and entry.cause["reprocess"] is None
    assert entry.cause["at"] == committed.finished_at
    lock = host.lock("ds/mart")
    assert lock.state is LockState.FREE and lock.position == rel(12)  # a rebuild does not move it


def test_a_mart_whose_lock_was_deleted_by_hand_still_has_its_built_steps_rebuilt(host: Host) -> None:
    """The lock rebuilt FREE without a position (an operator deleted `_bqlock`): which steps are
    built comes from the mart's history instead."""
    marts(host)
    arrive(host, "ds/sensors", 10, 12)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    mart = table_of(host, "ds/mart")
    host.store.inner.remove(mart.lock)
    lock_io.write(invocation(host), mart, Lock(), 0)
    assert host.lock("ds/mart").position is None
    arrive(host, "ds/sensors", 11)
    operator.unlock(invocation(host), sensors(host), skip_head=False)
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    assert [e.rel for e in rebuilt(host, "ds/mart")] == [rel(11)]


def test_a_request_made_again_after_it_was_applied_is_skipped_by_the_job(host: Host) -> None:
    """The same source change seen again (a finish redone by a handler that read the lock before
    it was released): the same request id, whose commit key the mart already has."""
    marts(host)
    late_hour_11(host)
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    [request] = events(host, "rebuild_requested")
    source = sensors(host)
    held, _ = lock_io.read(invocation(host), source)
    [covered] = [c for c in host.tables.commits["ds/sensors"] if c[0] == rel(11)]
    again = CoveredBatch(rel=rel(11), pointer="", pointer_generation=1, success_generation=covered[1])
    rebuilds.queue(invocation(host), source, held.model_copy(update={"acquired_at": None}), (again,))
    name = f"ds/mart/_turnstile/reprocess/{request['request_id']}.json"
    assert host.store.inner.stat(name) is not None  # the same name: created again
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]  # SKIPPED, not applied
    assert host.store.inner.stat(name) is None
    assert [o for r, o in entries(host, "ds/mart") if r == rel(11)] == ["COMMITTED", "REBUILT"]


def test_a_crash_between_the_request_and_the_lock_release_makes_no_second_request(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    marts(host)
    arrive(host, "ds/sensors", 10, 12)
    arrive(host, "ds/sensors", 11)
    real_write = lock_io.write
    crashed: list[str] = []

    def crash_once(inv: Any, table: Table, lock: Any, generation: int) -> int:
        releasing = lock.state is LockState.FREE and lock.position == rel(12) and not crashed
        sensor_job = table.prefix == "ds/sensors" and host.lock("ds/sensors").job_id is not None
        if releasing and sensor_job and host.store.inner.list_objects("ds/mart/_turnstile/reprocess/"):
            crashed.append(table.prefix)
            raise RuntimeError("the function's instance stopped before releasing the lock")
        return real_write(inv, table, lock, generation)

    monkeypatch.setattr(lock_io, "write", crash_once)
    operator.unlock(invocation(host), sensors(host), skip_head=False)
    host.drain()
    assert crashed == ["ds/sensors"]
    sweeper.sweep(invocation(host))
    host.drain()
    assert host.lock("ds/sensors").state is LockState.FREE
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    assert len(rebuilt(host, "ds/mart")) == 1


def test_a_reprocessed_source_hour_rebuilds_the_step_with_the_reprocess_as_its_cause(host: Host) -> None:
    marts(host)
    arrive(host, "ds/sensors", 10, 11, 12)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    operator.pause(invocation(host), table_of(host, "ds/mart"))
    done = reprocess_ops.request(invocation(host), "ds/sensors/2026/01/01/11/_SUCCESS", "fixed rows")
    host.drain()
    shown = status_ops.table_status(invocation(host), table_of(host, "ds/mart")).to_json()
    assert shown["rebuilds_pending"] == 1 and shown["rebuilds_oldest"] is not None
    assert shown["reprocess_pending"] == 0  # operators' requests only
    operator.resume(invocation(host), table_of(host, "ds/mart"))
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    [entry] = rebuilt(host, "ds/mart")
    assert entry.cause is not None and entry.cause["reprocess"] == done.request.rpartition("/")[2][:-5]
    shown = status_ops.table_status(invocation(host), table_of(host, "ds/mart")).to_json()
    assert shown["rebuilds_pending"] == 0 and shown["rebuilds_oldest"] is None


def test_an_append_mart_is_marked_stale_with_the_alert_and_not_rebuilt(host: Host) -> None:
    marts(host, STEPS | {"depends_on": ["ds.sensors"]})  # mode append
    late_hour_11(host)
    host.drain()
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]  # no rebuild: it would add rows again
    assert host.store.inner.list_objects("ds/mart/_turnstile/reprocess/") == []
    [alert] = events(host, "derived_step_stale")
    assert alert["severity"] == "ERROR" and alert["rel"] == rel(11) and alert["source"] == "ds/sensors"
    command = f"turnstile reprocess gs://{host.bucket}/ds/mart/{rel(11)}"
    assert command in str(alert["message"])
    shown = status_ops.table_status(invocation(host), table_of(host, "ds/mart")).to_json()
    [stale] = shown["stale_steps"]
    assert (stale["rel"], stale["source"], stale["source_rel"], stale["command"]) == (
        rel(11),
        "ds/sensors",
        rel(11),
        command,
    )
    assert shown["health"] != "IDLE"  # a stale step is a problem to act on
    # The operator deletes the step's rows, then reprocesses it: the stale record is cleared.
    reprocess_ops.request(invocation(host), f"ds/mart/{rel(11)}/_SUCCESS", "stale")
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    shown = status_ops.table_status(invocation(host), table_of(host, "ds/mart")).to_json()
    assert shown["stale_steps"] == ()


def test_a_rebuild_of_a_mart_rebuilds_the_mart_built_on_it(host: Host) -> None:
    marts(host, top=True)
    late_hour_11(host)
    host.drain()
    assert host.applied("ds/top") == [rel(10), rel(11), rel(12), rel(11)]
    [mart_entry] = rebuilt(host, "ds/mart")
    [top_entry] = rebuilt(host, "ds/top")
    assert top_entry.cause is not None and mart_entry.cause is not None
    assert (top_entry.cause["table"], top_entry.cause["rel"]) == ("ds/mart", rel(11))
    assert top_entry.cause["reprocess"] is not None and "-rebuild-" in top_entry.cause["reprocess"]
    found = host.store.inner.list_objects("ds/top/_turnstile/results/")
    rebuild_records = [o.name for o in found if "reprocess-" in o.name]
    assert len(rebuild_records) == 1


def test_history_says_rebuilt_with_the_cause(host: Host) -> None:
    marts(host)
    late_hour_11(host)
    host.drain()
    [entry] = rebuilt(host, "ds/mart")
    shown = json.loads(json.dumps(entry.to_json(), default=str))
    assert shown["outcome"] == "REBUILT" and shown["cause"]["table"] == "ds/sensors"
    assert "rebuilt after ds/sensors" in (entry.note() or "")


def test_a_rebuild_whose_transform_now_fails_blocks_the_mart_until_unlocked(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    marts(host)
    arrive(host, "ds/sensors", 10, 11, 12)
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]
    apply = MemoryTables.apply

    def broken(self: MemoryTables, batch: ManifestBatch, job_id: str) -> BatchResult:
        if batch.rebuild is not None:  # the transform fails on the changed source
            raise BatchFailed("transform.sql: division by zero")
        return apply(self, batch, job_id)

    monkeypatch.setattr(MemoryTables, "apply", broken)
    reprocess_ops.request(invocation(host), f"ds/sensors/{rel(11)}/_SUCCESS", "fixed rows")
    host.drain()
    mart = host.lock("ds/mart")
    assert mart.state is LockState.FAILED and mart.failed_rel == rel(11)
    assert host.lock("ds/sensors").state is LockState.FREE  # the source goes on
    shown = status_ops.table_status(invocation(host), table_of(host, "ds/mart")).to_json()
    assert shown["health"] == "BLOCKED"
    assert shown["lock"]["unlock_command"].startswith(f"turnstile unlock gs://{host.bucket}/ds/mart")
    assert shown["rebuilds_pending"] == 1  # kept, not dropped
    monkeypatch.setattr(MemoryTables, "apply", apply)  # the transform fixed
    operator.unlock(invocation(host), table_of(host, "ds/mart"), skip_head=False)
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    assert [e.rel for e in rebuilt(host, "ds/mart")] == [rel(11)]


def test_a_cycle_made_while_a_rebuild_is_queued_holds_the_rebuild_with_the_reason(host: Host) -> None:
    marts(host, top=True)
    arrive(host, "ds/sensors", 10, 11, 12)
    mart = table_of(host, "ds/mart")
    operator.pause(invocation(host), mart)
    reprocess_ops.request(invocation(host), f"ds/sensors/{rel(11)}/_SUCCESS", "fixed rows")
    host.drain()
    configure(host, "ds/mart", MART | {"depends_on": ["ds.sensors", "ds.top"]}, ordered=False)  # a cycle
    operator.resume(invocation(host), mart)
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12)]  # not rebuilt through the cycle
    shown = status_ops.table_status(invocation(host), mart).to_json()
    assert shown["health"] == "BLOCKED" and shown["rebuilds_pending"] == 1
    error = shown["lock"]["error"]
    assert f"rebuild of {rel(11)!r} waits, its request kept" in error
    assert "dependency cycle ds/mart -> ds/top -> ds/mart" in error
    configure(host, "ds/mart", MART, ordered=False)  # the cycle removed
    operator.unlock(invocation(host), mart, skip_head=False)
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(12), rel(11)]
    assert [e.rel for e in rebuilt(host, "ds/mart")] == [rel(11)]


class CommitsThenDies:
    """The job service: the first job that covers `rel` of `prefix` commits it, then its machine
    is lost before the job records it (no result record, no done signal)."""

    def __init__(self, inner: InlineRunner, host: Host, prefix: str, rel: str) -> None:
        self.inner, self.host, self.prefix, self.rel = inner, host, prefix, rel
        self.died: list[str] = []

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        manifest = read_manifest(self.host.functions_store, manifest_uri)
        covered = [
            b
            for b in manifest.batches
            if (b.table_prefix, b.rel, b.reprocess) == (self.prefix, self.rel, None)
        ]
        if self.died or not covered:
            self.inner.submit(job_id, manifest_uri)
            return
        self.host.tables.apply(covered[0], job_id)
        self.died.append(job_id)

    def status(self, job_id: str) -> JobStatus | None:
        if job_id in self.died:
            return JobStatus(job_id, JobState.FAILED, "the executor's machine was lost")
        return self.inner.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.inner.cancel(job_id)


def test_a_step_committed_by_a_job_that_died_before_recording_it_is_rebuilt_when_its_source_changes(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its retry, after a backoff, finds the commit and skips the step: the source hour that changed
    meanwhile would never reach it. The finish that scheduled the retry marked the step, so the
    change rebuilds it like any built step."""
    marts(host, MART | {"job_retry_backoff_seconds": 1})
    arrive(host, "ds/sensors", 10)
    assert isinstance(host.runner, InlineRunner)
    runner = CommitsThenDies(host.runner, host, "ds/mart", rel(11))
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    arrive(host, "ds/sensors", 11)
    assert runner.died and host.applied("ds/mart") == [rel(10), rel(11)]
    clock = ManualClock()
    operator_inv = Invocation(
        host.functions_store, runner, Settings.from_env(), clock, "sweeper", clock.now()
    )
    sweeper.sweep(operator_inv)  # the watchdog finds the job ended: its retry is scheduled
    host.drain()
    mart = table_of(host, "ds/mart")
    lock = host.lock("ds/mart")
    assert lock.state is LockState.FREE and lock.position == rel(10) and lock.retry_at is not None
    assert host.store.inner.stat(rebuilds.unrecorded_name(mart, rel(11))) is not None
    reprocess_ops.request(invocation(host), "ds/sensors/2026/01/01/11/_SUCCESS", "fixed rows")
    host.drain()
    [requested] = events(host, "rebuild_requested")
    assert requested["rel"] == rel(11) and requested["source"] == "ds/sensors"
    assert lock.retry_at is not None
    time.sleep(max(0.0, (lock.retry_at - datetime.now(UTC)).total_seconds()) + 0.1)  # the handlers' clock
    sweeper.sweep(invocation(host))
    host.drain()
    assert host.applied("ds/mart") == [rel(10), rel(11), rel(11)]  # the dead job's commit, the rebuild
    assert sorted(o for r, o in entries(host, "ds/mart") if r == rel(11)) == ["REBUILT", "SKIPPED"]
    lock = host.lock("ds/mart")
    assert lock.state is LockState.FREE and lock.position == rel(11)
    assert host.store.inner.stat(rebuilds.unrecorded_name(mart, rel(11))) is None
