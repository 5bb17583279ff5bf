"""No failed job goes unnoticed: an unordered batch whose job fails is recorded in the bucket, alerted
and shown by `status`, retried by itself when the failure is transient and by `turnstile retry`
otherwise; the sweeper's watchdog handles jobs that die without their done signal or run too long.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, put_all, table
from tests.functional.test_sweeper import ManualClock
from turnstile.config.settings import Settings
from turnstile.core.clock import Clock
from turnstile.core.errors import JobDeferred, JobError
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner
from turnstile.jobs.port import JobRunner, JobState, JobStatus
from turnstile.ops import retry as retry_ops
from turnstile.ops import status as status_ops
from turnstile.ops.errors import Refused
from turnstile.protocol import sweeper, unordered
from turnstile.protocol.context import Invocation
from turnstile.state.records import BatchFailure, LockState, OpenJob
from turnstile.store.gcs import GcsStore


class Unreliable:
    """The job service: `dying` jobs end FAILED at once without a trace (no result, no done
    signal); with `hanging`, jobs stay RUNNING until cancelled."""

    def __init__(self, inner: InlineRunner, *, dying: int = 0, hanging: bool = False) -> None:
        self.inner = inner
        self.dying = dying
        self.hanging = hanging
        self.states: dict[str, JobStatus] = {}
        self.submitted: list[str] = []
        self.cancelled: list[str] = []

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self.submitted.append(job_id)
        if self.dying > 0:
            self.dying -= 1
            self.states[job_id] = JobStatus(job_id, JobState.FAILED, "the executor's machine was lost")
        elif self.hanging:
            self.states[job_id] = JobStatus(job_id, JobState.RUNNING)
        else:
            self.inner.submit(job_id, manifest_uri)

    def status(self, job_id: str) -> JobStatus | None:
        return self.states.get(job_id) or self.inner.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)
        self.states[job_id] = JobStatus(job_id, JobState.CANCELLED, "cancelled")


def with_runner(monkeypatch: pytest.MonkeyPatch, host: Host, **faults: object) -> Unreliable:
    assert isinstance(host.runner, InlineRunner)
    runner = Unreliable(host.runner, **faults)  # type: ignore[arg-type]
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    return runner


def inv(host: Host, runner: JobRunner, clock: Clock | None = None) -> Invocation:
    clock = clock or ManualClock()
    return Invocation(host.store, runner, Settings.from_env(), clock, "operator", clock.now())


def events(host: Host, name: str) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == name]


def test_an_unordered_batch_that_fails_is_recorded_alerted_shown_and_retried_by_command(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host)
    host.tables.failing.add("02")
    generations = put_all(host, ["01", "02"])
    host.drain()
    assert host.applied(TABLE) == ["01"]
    t = table(host)
    found = gcs_store.read(t.failure("02", generations["02"]))
    assert found is not None
    failure = BatchFailure.decode(found.data, found.name)
    assert failure.transient is False and failure.retry_at is None and failure.attempt == 1
    assert "injected failure" in failure.error
    assert gcs_store.list_objects(t.open_jobs) == []  # the job's end was handled
    [alert] = events(host, "batch_failed")
    assert alert["severity"] == "ERROR" and alert["rel"] == "02"
    assert f"turnstile retry {t.uri}/02" in str(alert["message"])
    shown = status_ops.table_status(inv(host, runner), t)
    assert shown.health is status_ops.Health.FAILED and shown.health.is_problem
    [listed] = shown.failed_batches
    assert listed.rel == "02" and listed.retry_command == f"turnstile retry {t.uri}/02"
    # A retry before the fix fails again, and is recorded again.
    retried = retry_ops.retry(inv(host, runner), f"{TABLE}/02/_SUCCESS")
    assert retried.submitted and retried.job_id.endswith("-r1")
    host.drain()
    again = gcs_store.read(t.failure("02", generations["02"]))
    assert again is not None and BatchFailure.decode(again.data, again.name).attempt == 2
    # Fixed: the next attempt applies it, once, and the record goes.
    host.tables.failing.discard("02")
    retry_ops.retry(inv(host, runner), f"{TABLE}/02/_SUCCESS")
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert gcs_store.read(t.failure("02", generations["02"])) is None
    assert status_ops.table_status(inv(host, runner), t).health is status_ops.Health.IDLE


def test_a_handler_late_with_a_jobs_end_after_its_retry_applied_the_batch_leaves_no_failure(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """Two handlers read the open-job marker of a job that died after its commit; one recorded the
    failure, the retry found the commit (SKIPPED) and cleared it; the other, stalled until now,
    must not write the failure again: the table would show FAILED for a batch it holds."""
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host)
    generations = put_all(host, ["01"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    t = table(host)
    stale = OpenJob(
        job_id="turnstile-ds-tbl-u0123456789abcdef",
        success=f"{TABLE}/01/_SUCCESS",
        success_generation=generations["01"],
        rel="01",
        submitted_at=ManualClock().now(),
    )
    unordered.failed(inv(host, runner), t, stale, "the job died", transient=True)
    assert gcs_store.read(t.failure("01", generations["01"])) is None
    assert status_ops.table_status(inv(host, runner), t).health is status_ops.Health.IDLE


def test_of_two_handlers_of_a_jobs_failed_end_only_the_one_that_claims_its_marker_records_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """A handler that finds the open-job marker claimed by another (a duplicate done event while
    the first handles it) writes nothing; a claim older than the lease, whose handler died, is
    taken over and the failure recorded once."""
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host)
    generations = put_all(host, ["01"])
    host.drain()
    t = table(host)
    clock = ManualClock()
    operator = inv(host, runner, clock)
    job_id = "turnstile-ds-tbl-u0123456789abcdef"
    marker = OpenJob(
        job_id=job_id,
        success=f"{TABLE}/01/_SUCCESS",
        success_generation=generations["01"],
        rel="01",
        submitted_at=clock.now(),
        ending_at=clock.now(),
    )
    gcs_store.create(t.open_job(job_id), marker.encode())
    assert unordered.failed(operator, t, marker, "the job died", transient=True) is None
    assert gcs_store.read(t.failure("01", generations["01"])) is None
    assert gcs_store.read(t.open_job(job_id)) is not None
    clock.sleep((operator.lease + timedelta(seconds=1)).total_seconds())
    failure = unordered.failed(inv(host, runner, clock), t, marker, "the job died", transient=True)
    assert failure is not None and failure.attempt == 1
    assert gcs_store.read(t.failure("01", generations["01"])) is not None
    assert gcs_store.read(t.open_job(job_id)) is None


class Refusing(Unreliable):
    """The job service refuses every new job (a bad job setting, a quota it will not lift)."""

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self.submitted.append(job_id)
        raise JobError(f"CreateBatch {job_id}: 400 the runtime version is not supported")


def test_a_retry_whose_submit_is_refused_keeps_the_batch_failed_and_listed(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The refused submit wrote the new attempt's failure record, and the retry then deleted it:
    the batch vanished from status with nothing left to retry it."""
    host = start_host(monkeypatch, gcs_store, {})
    with_runner(monkeypatch, host)
    host.tables.failing.add("01")
    generations = put_all(host, ["01"])
    host.drain()
    t = table(host)
    assert gcs_store.read(t.failure("01", generations["01"])) is not None
    assert isinstance(host.runner, InlineRunner)
    refusing = Refusing(host.runner)
    retried = retry_ops.retry(inv(host, refusing), f"{TABLE}/01/_SUCCESS")
    assert refusing.submitted == [retried.job_id] and retried.job_id.endswith("-r1")
    # It says so: not submitted, and why.
    assert not retried.submitted
    assert retried.refused is not None and "the runtime version is not supported" in retried.refused
    found = gcs_store.read(t.failure("01", generations["01"]))
    assert found is not None
    failure = BatchFailure.decode(found.data, found.name)
    assert failure.attempt == 2 and "the job could not be submitted" in failure.error
    [listed] = status_ops.table_status(inv(host, refusing), t).failed_batches
    assert listed.rel == "01"


def test_retry_refuses_what_it_cannot_retry(monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host)
    put_all(host, ["01"])
    host.drain()
    with pytest.raises(Refused, match="has no failed job"):
        retry_ops.retry(inv(host, runner), f"{TABLE}/01/_SUCCESS")
    with pytest.raises(Refused, match="does not exist"):
        retry_ops.retry(inv(host, runner), f"{TABLE}/09/_SUCCESS")
    monkeypatch.setenv("ORDER_PER_TABLE", "true")
    with pytest.raises(Refused, match="turnstile unlock"):
        retry_ops.retry(inv(host, runner), f"{TABLE}/01/_SUCCESS")
    assert host.applied(TABLE) == ["01"]


def test_a_job_that_dies_without_its_done_signal_is_found_by_the_watchdog_and_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host, dying=1)
    config = {"job_retry_backoff_seconds": 5}
    host.upload(f"{TABLE}/_config/load.json", json.dumps(config).encode())
    generation = put_all(host, ["01"])["01"]
    host.drain()
    t = table(host)
    assert len(gcs_store.list_objects(t.open_jobs)) == 1  # nothing else would ever notice
    clock = ManualClock()
    report = sweeper.sweep(inv(host, runner, clock))  # within the lease: its events may be coming
    assert report[0]["jobs"]["ended"] == 0
    clock.sleep(Settings.from_env().function_timeout_sec + 1)
    report = sweeper.sweep(inv(host, runner, clock))
    assert report[0]["jobs"]["ended"] == 1
    found = gcs_store.read(t.failure("01", generation))
    assert found is not None
    failure = BatchFailure.decode(found.data, found.name)
    assert failure.transient and failure.retry_at is not None and "machine was lost" in failure.error
    [scheduled] = events(host, "job_retry_scheduled")
    assert scheduled["rel"] == "01"
    assert not events(host, "batch_failed")
    clock.sleep(10)
    report = sweeper.sweep(inv(host, runner, clock))
    assert report[0]["jobs"]["retried"] == 1
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert runner.submitted[1].endswith("-r1")
    assert gcs_store.read(t.failure("01", generation)) is None
    assert gcs_store.list_objects(t.open_jobs) == []


def test_a_job_running_past_its_timeout_is_cancelled_and_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    runner = with_runner(monkeypatch, host, hanging=True)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"job_timeout_seconds": 60}).encode())
    put_all(host, ["01"])
    host.drain()
    [job] = runner.submitted
    assert host.lock(TABLE).state is LockState.RUNNING
    clock = ManualClock()
    sweeper.sweep(inv(host, runner, clock))
    assert runner.cancelled == []  # not overdue yet
    clock.sleep(120)
    sweeper.sweep(inv(host, runner, clock))
    assert runner.cancelled == [job]
    [timed_out] = events(host, "job_timed_out")
    assert timed_out["job_id"] == job
    [report] = sweeper.sweep(inv(host, runner, clock))  # it ended: the table is woken
    assert report["verdict"] == "wake"
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FREE and lock.attempt == 1 and lock.retry_at is not None
    assert lock.retry_at - clock.now() < timedelta(minutes=15)


def test_a_batch_refused_for_its_config_stays_failed_across_sweeps_until_retried(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    runner = with_runner(monkeypatch, host)
    bad = {"schema": "id INT", "mode": "merge"}  # merge without merge_keys: refused, never submitted
    host.upload(f"{TABLE}/_config/load.json", json.dumps(bad).encode())
    generation = put_all(host, ["01"])["01"]
    host.drain()
    t = table(host)
    [alert] = events(host, "batch_failed")
    found = gcs_store.read(t.failure("01", generation))
    assert found is not None
    failed_at = BatchFailure.decode(found.data, found.name).failed_at
    clock = ManualClock()
    for _ in range(3):
        clock.sleep(300)
        [report] = sweeper.sweep(inv(host, runner, clock))
        assert report["reconciled"] == 0
        host.drain()
    assert events(host, "batch_failed") == [alert]  # one line per failure
    found = gcs_store.read(t.failure("01", generation))
    assert found is not None and BatchFailure.decode(found.data, found.name).failed_at == failed_at
    assert runner.submitted == []
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"schema": "id INT"}).encode())
    retry_ops.retry(inv(host, runner), f"{TABLE}/01/_SUCCESS")
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]


class RefusesFirstSubmit(Unreliable):
    """The job service refuses the first submit for a reason that passes (an IAM grant propagating)."""

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        if not self.submitted:
            self.submitted.append(job_id)
            raise JobDeferred(f"dataproc refused batch {job_id}: PERMISSION_DENIED")
        super().submit(job_id, manifest_uri)


def test_a_batch_whose_submit_was_deferred_waits_for_its_backoff_not_the_next_sweep(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, {})
    assert isinstance(host.runner, InlineRunner)
    runner = RefusesFirstSubmit(host.runner)
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"job_retry_backoff_seconds": 600}).encode())
    generation = put_all(host, ["01"])["01"]
    host.drain()
    found = gcs_store.read(table(host).failure("01", generation))
    assert found is not None
    failure = BatchFailure.decode(found.data, found.name)
    assert failure.transient and failure.attempt == 1 and failure.retry_at is not None
    clock = ManualClock()
    clock.sleep(Settings.from_env().function_timeout_sec + 1)
    assert clock.now() < failure.retry_at
    [report] = sweeper.sweep(inv(host, runner, clock))
    host.drain()
    assert report["reconciled"] == 0 and report["jobs"]["retried"] == 0
    assert len(runner.submitted) == 1  # attempt 0 is not submitted again before its backoff
    clock.current = failure.retry_at
    [report] = sweeper.sweep(inv(host, runner, clock))
    host.drain()
    assert report["jobs"]["retried"] == 1 and runner.submitted[1].endswith("-r1")
    assert host.tables.commits[TABLE] == [("01", generation)]
