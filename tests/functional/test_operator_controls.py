"""Pause, resume and cancel: an operator holds a table without losing or reordering a batch."""

from __future__ import annotations

import pytest

from tests.functional.harness import start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from tests.functional.test_job_failures import Unreliable, inv, with_runner
from tests.functional.test_sweeper import ManualClock
from turnstile.config.settings import Settings
from turnstile.core.errors import JobServiceUnavailable
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner
from turnstile.ops import retry as retry_ops
from turnstile.ops.status import Health, table_status
from turnstile.ops.status_jobs import describe
from turnstile.protocol import operator, sweeper
from turnstile.protocol.operator import CancelRefused
from turnstile.state.records import CancelChoice, LockState
from turnstile.store.gcs import GcsStore


def test_a_paused_table_queues_in_order_and_drains_after_resume(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["01"])
    host.drain()
    operator.pause(invocation(host), table(host), reason="a schema change upstream")
    generations |= put_all(host, ["03", "02"])
    host.drain()
    assert host.applied(TABLE) == ["01"] and host.backlog(TABLE) == ["02", "03"]
    [report] = sweeper.sweep(invocation(host))
    assert report["verdict"] == "ok"  # the sweeper leaves a paused table alone
    host.drain()
    assert host.applied(TABLE) == ["01"]
    operator.resume(invocation(host), table(host))
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert host.backlog(TABLE) == []


def test_a_paused_unordered_table_holds_its_batches_and_submits_them_on_resume(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)  # no ORDERME: one job per batch, as it arrives
    put_all(host, ["01"])
    host.drain()
    assert host.applied(TABLE) == ["01"]
    operator.pause(invocation(host), table(host), reason="upstream is re-sending")
    shown = table_status(invocation(host), table(host))
    assert shown.health is Health.PAUSED  # with nothing queued too
    assert shown.paused is not None and shown.paused.reason == "upstream is re-sending"
    assert shown.paused.resume_command == f"turnstile resume gs://{host.bucket}/{TABLE}"
    put_all(host, ["02", "03"])
    host.drain()
    assert host.applied(TABLE) == ["01"]  # no job started
    held = [r for r in host.log_records() if r.get("event") == "batch_held"]
    assert sorted(str(r["rel"]) for r in held) == ["02", "03"]
    assert table_status(invocation(host), table(host)).held == 2
    [report] = sweeper.sweep(invocation(host))
    assert report["jobs"]["released"] == 0  # still paused: the sweeper holds them too
    host.drain()
    assert host.applied(TABLE) == ["01"]
    operator.resume(invocation(host), table(host))
    host.drain()
    assert sorted(host.applied(TABLE)) == ["01", "02", "03"]
    after = table_status(invocation(host), table(host))
    assert after.paused is None and after.held == 0 and after.health is not Health.PAUSED


def test_held_batches_whose_resume_wake_up_was_lost_are_submitted_by_the_sweeper(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    operator.pause(invocation(host), table(host))
    put_all(host, ["01"])
    host.drain()
    assert host.applied(TABLE) == []
    gcs_store.remove(table(host).pause)  # the pause is gone but no _BACKFILL woke the table
    [report] = sweeper.sweep(invocation(host))
    assert report["jobs"]["released"] == 1
    host.drain()
    assert host.applied(TABLE) == ["01"]
    assert gcs_store.list_objects(table(host).held) == []


def test_a_held_batch_whose_config_broke_meanwhile_stays_held_reported_until_fixed(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    operator.pause(invocation(host), table(host))
    generations = put_all(host, ["01"])
    host.drain()
    host.upload(f"{TABLE}/_config/load.json", b'{"fromat": "csv"}')
    operator.resume(invocation(host), table(host))
    host.drain()
    [rejected] = [r for r in host.log_records() if r.get("event") == "rejected"]
    assert rejected["severity"] == "ERROR" and "stays held until this is fixed" in str(rejected["message"])
    assert rejected["object"] == f"gs://{host.bucket}/{TABLE}/01/_SUCCESS"
    assert len(gcs_store.list_objects(table(host).held)) == 1 and host.applied(TABLE) == []
    host.upload(f"{TABLE}/_config/load.json", b'{"format": "csv"}')
    [report] = sweeper.sweep(invocation(host))
    assert report["jobs"]["released"] == 1
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])


@pytest.mark.parametrize("choice", list(CancelChoice))
def test_cancel_keeps_what_was_committed_and_blocks_or_requeues_the_rest(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, choice: CancelChoice
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    runner = with_runner(monkeypatch, host, hanging=True)
    generations = put_all(host, ["01", "02"])
    host.drain()
    [job] = runner.submitted
    assert host.lock(TABLE).state is LockState.RUNNING
    assert operator.cancel(inv(host, runner), table(host), choice) == (job,)
    assert runner.cancelled == [job]
    runner.hanging = False  # the job service works again
    [report] = sweeper.sweep(inv(host, runner))  # the cancelled job has ended
    assert report["verdict"] == "wake"
    host.drain()
    lock = host.lock(TABLE)
    if choice is CancelChoice.BLOCK:
        assert lock.state is LockState.FAILED and lock.failed_rel == "01"
        assert lock.error is not None and "cancelled by an operator" in lock.error
        operator.unlock(inv(host, runner), table(host), skip_head=False)
        host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert host.lock(TABLE).state is LockState.FREE and host.lock(TABLE).retry_at is None


@pytest.mark.parametrize("choice", list(CancelChoice))
def test_cancel_of_an_unordered_table_cancels_its_open_jobs_and_their_batches_wait_or_go_again(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, choice: CancelChoice
) -> None:
    host = start_host(monkeypatch, gcs_store)  # no ORDERME: one job per batch
    runner = with_runner(monkeypatch, host, hanging=True)
    generations = put_all(host, ["01"])
    host.drain()
    [job] = runner.submitted
    assert operator.cancel(inv(host, runner), table(host), choice) == (job,)
    assert runner.cancelled == [job]
    runner.hanging = False
    clock = ManualClock()
    clock.sleep(Settings.from_env().function_timeout_sec + 1)
    sweeper.sweep(inv(host, runner, clock))  # the cancelled job ended without a done signal
    host.drain()
    if choice is CancelChoice.BLOCK:  # failed, and waits for `turnstile retry` like any failed batch
        [failed] = table_status(invocation(host), table(host)).failed_batches
        assert failed.rel == "01" and failed.retry_at is None
        assert "cancelled by an operator (block)" in failed.error
        assert host.applied(TABLE) == []
        retry_ops.retry(inv(host, runner), f"{TABLE}/01/_SUCCESS")
        host.drain()
    else:  # submitted again by that same sweep, whatever backoff its attempts would have had
        [requeued] = [r for r in host.log_records() if r.get("event") == "job_retry_scheduled"]
        assert "cancelled by an operator (requeue)" in str(requeued["error"])
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    assert table_status(invocation(host), table(host)).failed_batches == ()


class Unavailable(Unreliable):
    """The job service answers 503 to every submit while `down`; like Dataproc, it has nothing to
    cancel for a job it never took."""

    down = True

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        if self.down:
            raise JobServiceUnavailable("the job service answered 503")
        super().submit(job_id, manifest_uri)

    def cancel(self, job_id: str) -> None:
        if self.status(job_id) is not None:
            super().cancel(job_id)


def test_a_job_cancelled_before_the_service_took_it_applies_nothing_when_a_late_submit_gets_through(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """An invocation that read the RUNNING lock before the cancel (and stalled) submits its job
    after the table was failed for it: that job finds no manifest and commits nothing."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    assert isinstance(host.runner, InlineRunner)
    runner = Unavailable(host.runner)
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: runner)
    generations = put_all(host, ["01"])
    host.drain()
    stale = host.lock(TABLE)  # what the stalled invocation read: its job, never submitted
    assert stale.state is LockState.RUNNING and stale.job_id and stale.manifest
    assert runner.status(stale.job_id) is None
    operator.cancel(inv(host, runner), table(host), CancelChoice.BLOCK)
    host.drain()
    assert host.lock(TABLE).state is LockState.FAILED and host.lock(TABLE).failed_rel == "01"
    runner.down = False
    runner.submit(stale.job_id, f"gs://{host.bucket}/{stale.manifest}")  # the stalled invocation's submit
    assert host.applied(TABLE) == []
    assert host.lock(TABLE).state is LockState.FAILED
    operator.unlock(inv(host, runner), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    assert host.lock(TABLE).state is LockState.FREE


def test_cancel_without_a_running_job_is_refused(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    runner = with_runner(monkeypatch, host)
    put_all(host, ["01"])
    host.drain()
    with pytest.raises(
        CancelRefused, match=r"no job holds the table .* and no unordered job of it is running"
    ):
        operator.cancel(inv(host, runner), table(host), CancelChoice.BLOCK)
    assert host.applied(TABLE) == ["01"]


def test_batches_held_by_a_forgotten_pause_count_as_pending_in_the_sweepers_backlog_metrics(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)  # unordered: no backlog, held batches instead
    operator.pause(invocation(host), table(host), reason="forgotten")
    put_all(host, ["01", "02"])
    host.drain()
    clock = ManualClock()
    clock.sleep(7200)  # two hours later, nobody resumed it
    listed: list[str] = []
    list_objects = gcs_store.list_objects
    monkeypatch.setattr(
        gcs_store, "list_objects", lambda prefix, **kw: listed.append(prefix) or list_objects(prefix, **kw)
    )
    sweeper.sweep(invocation(host, clock))
    creates = host.store.ops["create"]
    sweeper.sweep(invocation(host, clock))
    assert host.store.ops["create"] == creates  # the held batches are not held again
    [first, second] = [r for r in host.log_records() if r.get("event") == "table_backlog"]
    assert first["pending"] == 2 and second["pending"] == 2
    assert isinstance(first["oldest_pending_age_seconds"], float)
    assert 7200 <= first["oldest_pending_age_seconds"] < 7200 + 60  # the alert's input
    internal = [p.removeprefix(f"{TABLE}/_turnstile/") for p in listed if "/_turnstile/" in p]
    assert internal.count("held/") == 2 and "failures/" not in internal  # one listing per sweep
    # One `batch_held` line per batch: the sweeps' reconciliation does not hold them again.
    held = [r for r in host.log_records() if r.get("event") == "batch_held"]
    assert sorted(str(r["rel"]) for r in held) == ["01", "02"]
    assert host.applied(TABLE) == []


def test_a_duplicate_event_of_a_held_batch_logs_no_second_batch_held(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    operator.pause(invocation(host), table(host))
    generation = put_all(host, ["01"])["01"]
    host.drain()
    host.deliver(f"{TABLE}/01/_SUCCESS", generation)  # Eventarc delivers it again
    assert len([r for r in host.log_records() if r.get("event") == "batch_held"]) == 1
    assert len(gcs_store.list_objects(table(host).held)) == 1


def test_status_shows_an_unordered_tables_running_job_and_its_cancel_until_the_watchdog_settles_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)  # unordered
    runner = with_runner(monkeypatch, host, hanging=True)
    put_all(host, ["01"])
    host.drain()
    [job] = runner.submitted
    shown = table_status(inv(host, runner), table(host))
    assert shown.health is Health.RUNNING  # not IDLE: a job runs
    [running] = shown.open_jobs
    assert (running.job_id, running.rel, running.attempt, running.cancel_requested) == (job, "01", 0, None)
    assert abs((running.since - ManualClock().now()).total_seconds()) < 60
    operator.cancel(inv(host, runner), table(host), CancelChoice.BLOCK)
    runner.hanging = False
    sweeper.sweep(inv(host, runner))  # within the lease: the watchdog does not settle it yet
    shown = table_status(inv(host, runner), table(host))
    assert shown.health is Health.RUNNING
    [cancelled] = shown.open_jobs
    assert cancelled.job_id == job and cancelled.cancel_requested == "block"
    line = describe("ds.tbl", cancelled)
    assert line.startswith(f"ds.tbl: job {job} for batch '01' running since ")
    assert "cancel requested (block)" in line
    clock = ManualClock()
    clock.sleep(Settings.from_env().function_timeout_sec + 1)
    sweeper.sweep(inv(host, runner, clock))
    shown = table_status(inv(host, runner), table(host))
    assert shown.health is Health.FAILED and shown.open_jobs == ()
