"""Pause, resume and cancel: an operator holds a table without losing or reordering a batch."""

from __future__ import annotations

import pytest

from tests.functional.harness import start_host
from tests.functional.scenario import ORDERED, TABLE, commits_in, invocation, put_all, table
from tests.functional.test_job_failures import inv, with_runner
from turnstile.protocol import operator, sweeper
from turnstile.protocol.operator import CancelRefused
from turnstile.records import CancelChoice, LockState
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
    assert operator.cancel(inv(host, runner), table(host), choice) == job
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


def test_cancel_without_a_running_job_is_refused(
    monkeypatch: pytest.MonkeyPatch, gcs_store: GcsStore
) -> None:
    host = start_host(monkeypatch, gcs_store, ORDERED)
    runner = with_runner(monkeypatch, host)
    put_all(host, ["01"])
    host.drain()
    with pytest.raises(CancelRefused, match="no job holds the table"):
        operator.cancel(inv(host, runner), table(host), CancelChoice.BLOCK)
    assert host.applied(TABLE) == ["01"]
