"""Transient job failures are retried a bounded number of times with backoff; terminal ones block.

A job that dies before it records why a batch failed (the machine, the service, a job that never
started) or a submit refused while permissions propagate is transient: the lock goes FREE with a
retry time, the sweeper wakes the table when it is due, and a new job (a new id) applies the batch.
When the retries are used up, the table blocks with the alert, as for a terminal failure.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import JobDeferred, JobServiceUnavailable
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner
from turnstile.jobs.port import JobState, JobStatus
from turnstile.ops.status import Health, table_status
from turnstile.protocol import operator, sweeper
from turnstile.protocol.context import Invocation
from turnstile.state.records import CancelChoice, LockState
from turnstile.store.gcs import GcsStore

BACKOFF = 1  # seconds before the first retry (the functions run on the real clock)


class Flaky:
    """The job service: the first `crashes` jobs die at once without a trace (FAILED, no result, no
    done signal); the first `refusals` submits are refused with PERMISSION_DENIED."""

    def __init__(
        self, inner: InlineRunner, *, crashes: int = 0, refusals: int = 0, unavailable: int = 0
    ) -> None:
        self.inner = inner
        self.crashes = crashes
        self.refusals = refusals
        self.unavailable = unavailable
        self.dead: set[str] = set()
        self.submitted: list[str] = []
        self.unanswered: list[str] = []

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        if self.refusals > 0:
            self.refusals -= 1
            raise JobDeferred(f"dataproc refused batch {job_id}: PERMISSION_DENIED")
        if self.unavailable > 0:
            self.unavailable -= 1
            self.unanswered.append(job_id)
            raise JobServiceUnavailable(f"dataproc: create batch {job_id}: 429 RESOURCE_EXHAUSTED")
        self.submitted.append(job_id)
        if self.crashes > 0 and job_id not in self.dead:
            self.crashes -= 1
            self.dead.add(job_id)
            return
        self.inner.submit(job_id, manifest_uri)

    def status(self, job_id: str) -> JobStatus | None:
        if job_id in self.dead:
            return JobStatus(job_id, JobState.FAILED, "the driver's machine was preempted")
        return self.inner.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.inner.cancel(job_id)


def flaky_host(monkeypatch: pytest.MonkeyPatch, store: GcsStore, **faults: int) -> tuple[Host, Flaky]:
    host = start_host(monkeypatch, store, ORDERED)
    assert isinstance(host.runner, InlineRunner)
    runner = Flaky(host.runner, **faults)
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    config = {"job_retries": 2, "job_retry_backoff_seconds": BACKOFF}
    host.upload(f"{TABLE}/_config/load.json", json.dumps(config).encode())
    return host, runner


def sweep(host: Host) -> str:
    """The sweeper, asking the flaky job service about jobs (as the deployed one would)."""
    runner = wiring.job_runner(Settings.from_env(), host.store)
    inv = Invocation(host.store, runner, Settings.from_env(), SystemClock(), "sweeper", SystemClock().now())
    [report] = sweeper.sweep(inv)
    return str(report["verdict"])


def sweep_when_due(host: Host) -> str:
    """Wait out the backoff (with its jitter), then sweep as Cloud Scheduler would."""
    lock = host.lock(TABLE)
    assert lock.retry_at is not None
    time.sleep(max(0.0, lock.retry_at.timestamp() - time.time()) + 0.05)
    verdict = sweep(host)
    host.drain()
    return verdict


def events(host: Host, name: str) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == name]


def test_a_job_that_dies_without_a_trace_is_retried_with_a_new_job(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store, crashes=1)
    generations = put_all(host, ["01", "02"])
    host.drain()
    [first] = runner.submitted  # the subscriber saw it end (no done signal) in the same run
    lock = host.lock(TABLE)
    assert lock.state is LockState.FREE and lock.attempt == 1 and lock.retry_at is not None
    assert lock.last_error is not None and "preempted" in lock.last_error
    [scheduled] = events(host, "job_retry_scheduled")
    assert scheduled["rel"] == "01" and scheduled["attempt"] == 1
    assert not events(host, "table_blocked")
    assert sweep(host) == "ok"  # not due yet: the sweeper leaves it alone
    assert sweep_when_due(host) == "wake"
    assert runner.submitted[0] == first and len(runner.submitted) == 2 and runner.submitted[1] != first
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    settled = host.lock(TABLE)
    assert settled.state is LockState.FREE and settled.attempt == 0 and settled.retry_at is None


def test_retries_are_bounded_then_the_table_blocks_with_the_alert(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store, crashes=10)
    put_all(host, ["01"])
    host.drain()
    for _ in range(2):  # job_retries: 2
        assert host.lock(TABLE).state is LockState.FREE
        sweep_when_due(host)
        sweep(host)  # the retried job died too
        host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "01"
    assert lock.error is not None and "after 3 attempts" in lock.error
    assert len(runner.submitted) == 3
    assert [e["attempt"] for e in events(host, "job_retry_scheduled")] == [1, 2]
    blocked = events(host, "table_blocked")  # the subscriber's, then the sweeper's on each sweep
    assert blocked and all(b["rel"] == "01" for b in blocked)
    assert host.applied(TABLE) == []


def test_a_submit_refused_while_permissions_propagate_is_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, _ = flaky_host(monkeypatch, gcs_store, refusals=1)
    generations = put_all(host, ["01"])
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FREE and lock.attempt == 1
    assert lock.last_error is not None and "PERMISSION_DENIED" in lock.last_error
    assert sweep_when_due(host) == "wake"
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])


def test_a_batch_that_records_its_own_failure_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store)
    host.tables.failing.add("01")
    put_all(host, ["01"])
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.attempt == 0
    assert not events(host, "job_retry_scheduled")
    assert len(runner.submitted) == 1


def test_a_submit_the_job_service_does_not_take_is_made_again_under_the_same_id_then_applies(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store, unavailable=1)
    generations = put_all(host, ["01"])
    host.drain()
    assert all(status < 500 for _, _, status in host.delivered)  # acknowledged, not redelivered
    lock = host.lock(TABLE)
    # Still RUNNING on the same job: a create that got through is attached to, never doubled.
    assert lock.state is LockState.RUNNING and lock.attempt == 1 and lock.retry_at is not None
    assert lock.last_error is not None and "RESOURCE_EXHAUSTED" in lock.last_error
    [scheduled] = events(host, "job_retry_scheduled")
    assert (scheduled["rel"], scheduled["attempt"], scheduled["job_id"]) == ("01", 1, lock.job_id)
    shown = table_status(invocation(host), table(host))
    assert shown.health is Health.RETRYING
    assert shown.lock is not None and (shown.lock.attempt, shown.lock.retry_at) == (1, lock.retry_at)
    assert "RESOURCE_EXHAUSTED" in (shown.lock.last_error or "")
    assert sweep(host) == "ok"  # not due yet
    assert sweep_when_due(host) == "wake"
    assert runner.unanswered == [lock.job_id] and runner.submitted == [lock.job_id]
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    assert host.lock(TABLE).state is LockState.FREE


def test_a_job_service_that_never_takes_the_job_blocks_the_table_after_the_retries(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store, unavailable=100)
    put_all(host, ["01"])
    host.drain()
    for _ in range(2):  # job_retries: 2
        assert host.lock(TABLE).state is LockState.RUNNING
        sweep_when_due(host)
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "01"
    assert lock.error is not None and "RESOURCE_EXHAUSTED" in lock.error and "after 3 attempts" in lock.error
    assert len(runner.unanswered) == 3 and len(set(runner.unanswered)) == 1 and runner.submitted == []
    assert [e["attempt"] for e in events(host, "job_retry_scheduled")] == [1, 2]
    assert events(host, "table_blocked")
    assert all(status < 500 for _, _, status in host.delivered)


def test_a_job_the_service_never_took_waits_for_resume_when_paused_and_is_cancelled_by_cancel(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host, runner = flaky_host(monkeypatch, gcs_store, unavailable=1)
    put_all(host, ["01"])
    host.drain()
    job = host.lock(TABLE).job_id
    operator.pause(invocation(host), table(host), "maintenance")
    sweep_when_due(host)
    assert runner.submitted == []  # paused: no job starts, though the service answers again
    assert host.lock(TABLE).state is LockState.RUNNING
    operator.resume(invocation(host), table(host))
    operator.pause(invocation(host), table(host), "maintenance")
    host.drain()
    assert runner.submitted == []  # the resumed run saw the new pause
    assert operator.cancel(invocation(host), table(host), CancelChoice.BLOCK) == (job,)
    host.drain()  # the cancel wakes the table: the job the service never had is not submitted
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "01"
    assert lock.error is not None and "cancelled by an operator" in lock.error
    assert runner.submitted == [] and host.applied(TABLE) == []
