"""A failed batch blocks its table until a human unlocks it; late batches; transient and terminal errors.

The cycle under test: a job fails -> the lock is FAILED, names the batch, the error and the command to
run, and one ERROR line fires -> later batches only queue, whatever wakes the subscriber -> a human
fixes the cause and unlocks (applying the failed batch again, or skipping it) -> the rest applies in
order.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.functional.harness import Host, start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, has_backfill, invocation, put_all, table
from turnstile.core.errors import JobServiceUnavailable
from turnstile.entrypoints import wiring
from turnstile.jobs.inline import InlineRunner
from turnstile.jobs.port import JobStatus
from turnstile.ops import backfill as backfill_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops.status import Health, table_status
from turnstile.protocol import operator, sweeper
from turnstile.protocol.operator import UnlockRefused
from turnstile.state.records import BatchOutcome, BatchResult, LockState
from turnstile.store.gcs import GcsStore
from turnstile.store.memory import MemoryStore


def records(host: Host, event: str) -> list[dict[str, object]]:
    return [r for r in host.log_records() if r.get("event") == event]


def assert_settled(host: Host) -> None:
    assert host.backlog(TABLE) == []
    assert host.lock(TABLE).state is LockState.FREE
    assert not has_backfill(host)


def fail_at(host: Host, failing: str, batches: list[str]) -> dict[str, int]:
    """Queue `batches` on an ordered table whose batch `failing` fails; return the generations."""
    host.tables.failing.add(failing)
    generations = put_all(host, batches)
    host.drain()
    return generations


# The whole failure cycle


@pytest.mark.parametrize("skip_head", [False, True])
def test_a_failed_batch_blocks_the_table_until_an_operator_unlocks_it(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, skip_head: bool
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 1}).encode())
    generations = fail_at(host, "02", ["01", "02", "03"])
    assert host.tables.commits[TABLE] == commits_in(generations, ["01"])
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED
    assert lock.failed_rel == "02"
    assert lock.position == "01"
    assert lock.error is not None and "injected failure of '02'" in lock.error
    assert lock.unlock_command == f"turnstile unlock gs://{host.bucket}/{TABLE} [--skip-head]"
    assert lock.job_id is not None and lock.job_id in host.runner.submitted  # type: ignore[attr-defined]
    assert [c.rel for c in lock.covers] == ["02"]
    assert host.backlog(TABLE) == ["02", "03"]
    [blocked] = records(host, "table_blocked")
    assert blocked["severity"] == "ERROR"
    assert blocked["table"] == TABLE
    assert blocked["job_id"] == lock.job_id
    assert blocked["rel"] == "02"
    assert blocked["error"] == lock.error
    assert blocked["unlock_command"] == lock.unlock_command
    assert str(lock.unlock_command) in str(blocked["message"])

    # Later batches only queue: their events, a redelivered job-done event and a manual _BACKFILL
    # change nothing.
    generations |= put_all(host, ["04"])
    host.drain()
    host.upload(f"{TABLE}/_BACKFILL")
    host.drain()
    assert lock.job_id is not None
    host.deliver(f"{TABLE}/_turnstile/jobs/{lock.job_id}.done", 1)  # whatever the generation
    host.drain()
    assert host.applied(TABLE) == ["01"]
    assert host.backlog(TABLE) == ["02", "03", "04"]
    still = host.lock(TABLE)
    assert still.state is LockState.FAILED and still.failed_rel == "02" and still.error == lock.error
    assert len(records(host, "table_blocked")) == 1  # the alert fired once; the rest are warnings
    assert records(host, "table_still_blocked")
    assert all(r["severity"] == "WARNING" for r in records(host, "table_still_blocked"))
    submitted = list(host.runner.submitted)  # type: ignore[attr-defined]

    # The operator fixes the cause (or applies 02 by hand) and unlocks.
    host.tables.failing.clear()
    unlocked = operator.unlock(invocation(host), table(host), skip_head=skip_head)
    assert unlocked.failed_rel == "02" and unlocked.job_id == lock.job_id
    assert (unlocked.dropped_pointer is not None) is skip_head
    host.drain()
    order = ["01", "03", "04"] if skip_head else ["01", "02", "03", "04"]
    assert host.tables.commits[TABLE] == commits_in(generations, order)
    assert_settled(host)
    assert host.lock(TABLE).position == "04"
    new_jobs = host.runner.submitted[len(submitted) :]  # type: ignore[attr-defined]
    assert len(new_jobs) == len(order) - 1 and lock.job_id not in new_jobs  # a retry is a new job
    [unlock_log] = records(host, "table_unlocked")
    assert unlock_log["skip_head"] is skip_head and unlock_log["rel"] == "02"


def test_unlock_is_refused_unless_the_lock_is_failed_and_unchanged(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    inv = invocation(host)
    with pytest.raises(UnlockRefused, match="not FAILED"):
        operator.unlock(inv, table(host), skip_head=False)  # no lock at all
    put_all(host, ["01"])
    host.drain()
    with pytest.raises(UnlockRefused, match="FREE, not FAILED"):
        operator.unlock(inv, table(host), skip_head=True)
    assert host.backlog(TABLE) == []
    generations = fail_at(host, "02", ["02", "03"])
    failed = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert failed is not None
    with pytest.raises(UnlockRefused, match="changed since it was read"):
        operator.unlock(inv, table(host), skip_head=True, expected_generation=failed.generation - 1)
    # Refusals change nothing: no pointer dropped, the lock untouched, no subscriber started.
    assert host.backlog(TABLE) == ["02", "03"]
    after = host.store.inner.stat(f"{TABLE}/_bqlock")
    assert after is not None and after.generation == failed.generation
    assert host.lock(TABLE).state is LockState.FAILED
    host.tables.failing.clear()
    operator.unlock(inv, table(host), skip_head=False, expected_generation=failed.generation)
    host.drain()
    assert host.tables.commits[TABLE][1:] == commits_in(generations, ["02", "03"])
    assert_settled(host)
    with pytest.raises(UnlockRefused):
        operator.unlock(inv, table(host), skip_head=False, expected_generation=failed.generation)


def test_a_second_failure_after_unlock_blocks_again_on_the_same_batch(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = fail_at(host, "02", ["01", "02", "03"])
    operator.unlock(invocation(host), table(host), skip_head=False)  # not fixed yet
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "02"
    assert host.backlog(TABLE) == ["02", "03"]
    assert len(records(host, "table_blocked")) == 2
    assert host.applied(TABLE) == ["01"]
    host.tables.failing.clear()
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02", "03"])
    assert_settled(host)


# A batch that arrives after a later one was applied


def _late_batch(host: Host) -> dict[str, int]:
    generations = put_all(host, ["01", "03"])
    host.drain()
    assert host.applied(TABLE) == ["01", "03"]
    generations |= put_all(host, ["02"])  # upstream publishes 02 after 03 was applied
    host.drain()
    return generations


@pytest.mark.parametrize("skip_head", [False, True])
def test_a_late_batch_blocks_the_table_and_the_operator_decides(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore, skip_head: bool
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = _late_batch(host)
    assert host.applied(TABLE) == ["01", "03"]
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED
    assert lock.failed_rel == "02"
    assert lock.error is not None and "'02' arrived after '03' had been applied" in lock.error
    assert lock.position == "03"
    assert host.backlog(TABLE) == ["02"]
    [blocked] = records(host, "table_blocked")
    assert blocked["rel"] == "02" and blocked["job_id"] is None and "after '03'" in str(blocked["error"])
    # A new batch queues behind the blocked one.
    generations |= put_all(host, ["04"])
    host.drain()
    assert host.applied(TABLE) == ["01", "03"]
    assert host.backlog(TABLE) == ["02", "04"]
    operator.unlock(invocation(host), table(host), skip_head=skip_head)
    host.drain()
    order = ["01", "03", "04"] if skip_head else ["01", "03", "02", "04"]
    assert host.tables.commits[TABLE] == commits_in(generations, order)
    assert_settled(host)
    assert host.lock(TABLE).position == "04"


def test_a_late_batch_dropped_with_skip_head_is_recorded_and_never_queued_again(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """It never ran a job, so nothing said it was dropped: `backfill` queued it again, and the table
    blocked on it once more. Its record says so now, and `history` shows the drop."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = _late_batch(host)
    operator.unlock(invocation(host), table(host), skip_head=True)
    host.drain()
    found = host.store.inner.read(table(host).result("02", generations["02"]))
    assert found is not None
    record = BatchResult.decode(found.data, found.name)
    assert record.outcome is BatchOutcome.FAILED and record.snapshot_id is None
    assert record.error is not None and record.error.startswith("dropped by an operator (unlock --skip-head)")
    assert "'02' arrived after '03' had been applied" in record.error
    candidates = backfill_ops.candidates(host.store, invocation(host).settings, TABLE)
    summary = backfill_ops.publish(candidates, lambda: invocation(host), [])
    assert summary.counts() == {backfill_ops.HANDLED: 3}
    host.drain()
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "03"])


def test_letting_a_late_batch_through_keeps_every_commit_in_the_history(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The batches applied after the late one are not queued again when it is let through, so no
    COMMITTED result record is ever replaced: the history matches the table's commits."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = _late_batch(host)
    generations |= put_all(host, ["04"])
    host.drain()
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "03", "02", "04"])
    history = {
        rel: BatchResult.decode(found.data, found.name)
        for rel in ("01", "02", "03", "04")
        if (found := gcs_store.read(table(host).result(rel, generations[rel]))) is not None
    }
    assert {rel: r.outcome for rel, r in history.items()} == dict.fromkeys(
        ("01", "02", "03", "04"), BatchOutcome.COMMITTED
    )
    records_listed = gcs_store.list_objects(table(host).internal + "results/")
    assert len(records_listed) == 4  # one record per batch: nothing applied was attempted again


def test_a_late_batch_let_through_does_not_move_the_position_back(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """After 02 is let through (03 was applied), a batch 025 that arrives even later still sorts
    before 03, the last batch applied in order: it must block the table too, not slip in."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = _late_batch(host)
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.applied(TABLE) == ["01", "03", "02"]
    assert host.lock(TABLE).state is LockState.FREE
    assert host.lock(TABLE).position == "03"
    generations |= put_all(host, ["025"])
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "025"
    assert lock.error is not None and "after '03' had been applied" in lock.error
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "03", "02"])
    operator.unlock(invocation(host), table(host), skip_head=True)
    generations |= put_all(host, ["04"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "03", "02", "04"])
    assert_settled(host)


# Transient errors: answer 500, Eventarc redelivers, the batch is applied once


class FlakyRunner:
    """Wraps a runner; `submit` raises JobServiceUnavailable `failures` times first."""

    def __init__(self, inner: InlineRunner, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.attempts = 0

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            raise JobServiceUnavailable("dataproc: 503 service unavailable")
        self.inner.submit(job_id, manifest_uri)

    def status(self, job_id: str) -> JobStatus | None:
        return self.inner.status(job_id)

    def cancel(self, job_id: str) -> None:
        self.inner.cancel(job_id)


def _flaky(monkeypatch: pytest.MonkeyPatch, host: Host, failures: int) -> FlakyRunner:
    assert isinstance(host.runner, InlineRunner)
    flaky = FlakyRunner(host.runner, failures)
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: flaky)
    return flaky


def test_an_unavailable_job_service_is_retried_and_the_batch_applied_once(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """An unordered table's event is redelivered (an ordered table's lock keeps the job and submits
    it again with backoff: test_retries.py)."""
    env: dict[str, str] = {}
    host = start_host(monkeypatch, gcs_store, env)
    flaky = _flaky(monkeypatch, host, failures=2)
    generations = put_all(host, ["2024/05/01/13", "2024/05/01/14"])
    host.drain(max_events=300)
    assert flaky.attempts == 2 + len(host.runner.submitted)  # type: ignore[attr-defined]
    failed = [d for d in host.delivered if d[2] >= 500]
    assert len(failed) == 2
    redelivered = {(n, g) for n, g, _ in failed}
    for name, generation in redelivered:
        answers = [s for n, g, s in host.delivered if (n, g) == (name, generation)]
        assert answers[-1] < 500, f"{name} was never acknowledged: {answers}"
    assert sorted(host.tables.commits[TABLE]) == commits_in(generations, sorted(generations))
    assert len(set(host.runner.submitted)) == len(host.runner.submitted)  # type: ignore[attr-defined]
    if env:
        assert_settled(host)


def test_a_transient_error_never_blocks_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    host = start_host(monkeypatch, MemoryStore("transient"), ORDERED)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"job_retry_backoff_seconds": 1}).encode())
    _flaky(monkeypatch, host, failures=1)
    generations = put_all(host, ["01", "02"])
    host.drain(max_events=300)
    retry_at = host.lock(TABLE).retry_at
    assert retry_at is not None  # the job is submitted again when due, by the sweeper
    time.sleep(max(0.0, retry_at.timestamp() - time.time()) + 0.05)
    sweeper.sweep(invocation(host))
    host.drain(max_events=300)
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert not records(host, "table_blocked")
    assert_settled(host)


# Terminal errors: acknowledged, logged, and the batch is not lost


def test_an_unknown_load_json_key_on_an_ordered_table_blocks_it_until_fixed(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    host.upload(f"{TABLE}/_config/ORDERME")
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_jobs": 2}).encode())
    generations = put_all(host, ["01", "02"])
    host.drain(max_events=300)
    # Acknowledged, not retried forever.
    assert all(status < 500 for _, _, status in host.delivered)
    assert host.applied(TABLE) == []
    errors = [r for r in host.log_records() if r["severity"] == "ERROR"]
    assert errors
    for line in errors:
        text = json.dumps(line)
        assert f"gs://{host.bucket}/{TABLE}/_config/load.json" in text
        assert "max_batches_per_jobs" in text
    warnings = [r for r in host.log_records() if r.get("event") == "config_error"]
    assert sorted(str(r["rel"]) for r in warnings) == ["01", "02"]
    assert all(r["severity"] == "WARNING" and "max_batches_per_jobs" in str(r["error"]) for r in warnings)
    # Not lost: the table is blocked on the first batch, and says so.
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED
    assert lock.failed_rel == "01"
    assert lock.error is not None and "max_batches_per_jobs" in lock.error and "load.json" in lock.error
    assert host.backlog(TABLE) == ["01", "02"]
    blocked = records(host, "table_blocked")
    assert len(blocked) == 1 and blocked[0]["rel"] == "01"
    # Fixed, then unlocked as the lock says: both apply, in order.
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"max_batches_per_job": 2}).encode())
    operator.unlock(invocation(host), table(host), skip_head=False)
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["01", "02"])
    assert_settled(host)


def test_an_unknown_load_json_key_on_an_unordered_table_is_reported_and_acknowledged(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"fromat": "csv"}).encode())
    generation = host.put_batch(f"{TABLE}/01")
    host.drain()
    assert all(status < 500 for _, _, status in host.delivered)
    assert host.applied(TABLE) == []
    # Recorded as failed, with the alert: status shows it, and says how to apply it after the fix.
    [alert] = [r for r in host.log_records() if r.get("event") == "batch_failed"]
    assert alert["severity"] == "ERROR" and alert["rel"] == "01"
    assert "fromat" in str(alert["error"]) and "load.json" in str(alert["error"])
    assert f"turnstile retry gs://{host.bucket}/{TABLE}/01" in str(alert["message"])
    shown = table_status(invocation(host), table(host))
    assert shown.health is Health.FAILED
    [failed] = shown.failed_batches
    assert (failed.rel, failed.success_generation, failed.retry_at) == ("01", generation, None)
    # Fixed, then retried as status says: applied once, and the failure is gone.
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"format": "csv"}).encode())
    retry_ops.retry(invocation(host), f"{TABLE}/01/_SUCCESS")
    host.drain()
    assert host.tables.commits[TABLE] == [("01", generation)]
    assert table_status(invocation(host), table(host)).failed_batches == ()


def test_an_unordered_failure_is_cleared_by_the_re_upload_that_commits(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """The runbook's other way out, re-uploading the batch, must not leave the old failure alarming."""
    host = start_host(monkeypatch, gcs_store)
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"fromat": "csv"}).encode())
    host.put_batch(f"{TABLE}/01")
    host.drain()
    assert len(table_status(invocation(host), table(host)).failed_batches) == 1
    host.upload(f"{TABLE}/_config/load.json", json.dumps({"format": "csv"}).encode())
    again = host.upload(f"{TABLE}/01/_SUCCESS")
    host.drain()
    assert host.tables.commits[TABLE] == [("01", again)]
    shown = table_status(invocation(host), table(host))
    assert shown.failed_batches == () and shown.health is not Health.FAILED


def test_a_broken_load_json_that_may_rename_the_table_is_rejected_not_queued(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """With a destinationRegex in the broken file, the table a batch belongs to is unknown: queueing
    it under the default layout could put it in another table's backlog."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    broken = {"destinationRegex": "^raw/(?P<dataset>[^/]+)/(?P<table>[^/]+)/", "fromat": "csv"}
    host.upload("raw/_config/load.json", json.dumps(broken).encode())
    host.put_batch("raw/ds/tbl/01")
    host.drain()
    assert all(status < 500 for _, _, status in host.delivered)
    assert host.tables.commits == {}
    assert [o.name for o in host.store.inner.list_objects("raw/") if "_backlog" in o.name] == []
    [rejected] = [r for r in host.log_records() if r.get("event") == "rejected"]
    assert "fromat" in str(rejected["error"]) and f"gs://{host.bucket}/raw/_config/load.json" in str(
        rejected["error"]
    )
    assert "upload" in str(rejected["message"])


def test_a_batch_at_the_root_of_an_ordered_table_is_rejected_and_the_table_goes_on(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """Its pointer would sort after every dated folder: each later batch would be late for good."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    generations = put_all(host, ["2024/01/05"])
    host.drain()
    host.put_batch(TABLE)  # data files and _SUCCESS right in ds/tbl/
    host.drain()
    [rejected] = records(host, "rejected")
    assert rejected["object"] == f"gs://{host.bucket}/{TABLE}/_SUCCESS"
    assert "is a batch at the root of ordered table ds.tbl" in str(rejected["error"])
    assert f"gs://{host.bucket}/{TABLE}/<batch>/" in str(rejected["error"])
    assert host.backlog(TABLE) == []
    generations |= put_all(host, ["2024/01/07"])
    host.drain()
    assert host.tables.commits[TABLE] == commits_in(generations, ["2024/01/05", "2024/01/07"])
    assert host.lock(TABLE).state is LockState.FREE


def test_a_flat_ordered_table_stops_on_a_batch_folder_and_a_dropped_one_stays_dropped(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    """Position '' (a batch at the root applied last): a folder batch after it is late; once dropped
    with --skip-head, the sweeper's reconciliation must not publish it again."""
    host = start_host(monkeypatch, gcs_store, ORDERED)
    root = host.put_batch(TABLE)
    host.drain()
    assert host.lock(TABLE).position == ""
    put_all(host, ["2024/01/02"])
    host.drain()
    lock = host.lock(TABLE)
    assert lock.state is LockState.FAILED and lock.failed_rel == "2024/01/02"
    operator.unlock(invocation(host), table(host), skip_head=True)
    host.drain()
    [report] = sweeper.sweep(invocation(host))
    host.drain()
    assert report["reconciled"] == 0 and records(host, "batch_reconciled") == []
    assert host.tables.commits[TABLE] == [("", root)]
    assert host.lock(TABLE).state is LockState.FREE and host.backlog(TABLE) == []
