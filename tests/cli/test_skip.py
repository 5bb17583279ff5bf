"""`turnstile skip`: a queued batch of an ordered table dropped on the record, so that nothing queues
it again; refused for a batch that is committed, being applied, or blocking the table."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tests.cli.conftest import Run, World, one_error_line
from turnstile.core.errors import PreconditionFailed
from turnstile.state.records import BatchOutcome, BatchResult, CoveredBatch, Lock, LockState

APPLIED = "incremental/2024/05/01/12"
HEAD = "incremental/2024/05/01/13"
NEXT = "incremental/2024/05/01/14"


@pytest.fixture
def ordered(world: World) -> World:
    world.store.write("sales/orders/_config/ORDERME", b"")
    return world


def result_of(world: World, rel: str, generation: int) -> BatchResult | None:
    found = world.store.read(world.table.result(rel, generation))
    return None if found is None else BatchResult.decode(found.data, found.name)


def test_skip_records_the_batch_as_dropped_and_deletes_its_pointer(run: Run, ordered: World) -> None:
    ordered.queue(HEAD)
    generation = ordered.queue(NEXT)
    result = run("skip", f"{ordered.uri}/{NEXT}", "--reason", "loaded by hand", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["rel"] == NEXT and shown["generation"] == generation
    assert shown["pointer"] == f"gs://{ordered.store.bucket}/{ordered.table.pointer(NEXT)}"
    assert ordered.store.stat(ordered.table.pointer(NEXT)) is None
    assert ordered.store.stat(ordered.table.pointer(HEAD)) is not None  # the others stay queued
    record = result_of(ordered, NEXT, generation)
    assert record is not None and record.outcome is BatchOutcome.FAILED
    assert record.error == "dropped by an operator (turnstile skip), not applied: loaded by hand"
    history = run("history", ordered.uri, "-o", "json")
    assert NEXT in history.stdout and "dropped by an operator" in history.stdout


def test_skip_without_yes_and_without_a_terminal_changes_nothing(run: Run, ordered: World) -> None:
    generation = ordered.queue(NEXT)
    result = run("skip", f"{ordered.uri}/{NEXT}")
    assert result.exit_code == 2
    assert "pass --yes" in one_error_line(result)
    assert ordered.store.stat(ordered.table.pointer(NEXT)) is not None
    assert result_of(ordered, NEXT, generation) is None


def test_skip_refuses_a_committed_batch(run: Run, ordered: World) -> None:
    generation = ordered.upload(APPLIED)
    ordered.result(APPLIED, generation)
    result = run("skip", f"{ordered.uri}/{APPLIED}/_SUCCESS", "--yes")
    assert result.exit_code == 2
    assert "is already committed: there is nothing to skip" in one_error_line(result)
    record = result_of(ordered, APPLIED, generation)
    assert record is not None and record.outcome is BatchOutcome.COMMITTED


def test_skip_refuses_the_batch_the_running_job_applies(run: Run, ordered: World) -> None:
    generation = ordered.queue(HEAD)
    pointer = ordered.store.stat(ordered.table.pointer(HEAD))
    assert pointer is not None
    covered = CoveredBatch(
        rel=HEAD, pointer=pointer.name, pointer_generation=pointer.generation, success_generation=generation
    )
    running = Lock(state=LockState.RUNNING, job_id="turnstile-sales-orders-1", covers=(covered,))
    ordered.store.write(ordered.table.lock, running.encode())
    result = run("skip", f"{ordered.uri}/{HEAD}", "--yes")
    assert result.exit_code == 2
    assert "is being applied by job turnstile-sales-orders-1" in one_error_line(result)
    assert ordered.store.stat(ordered.table.pointer(HEAD)) is not None
    assert result_of(ordered, HEAD, generation) is None


def test_skip_of_the_failed_head_points_to_unlock_skip_head(run: Run, ordered: World) -> None:
    ordered.queue(HEAD)
    ordered.fail(HEAD, position=APPLIED)
    result = run("skip", f"{ordered.uri}/{HEAD}", "--yes")
    assert result.exit_code == 2
    assert f"turnstile unlock {ordered.uri} --skip-head" in one_error_line(result)
    assert ordered.store.stat(ordered.table.pointer(HEAD)) is not None


def test_skip_refuses_a_batch_of_an_unordered_table(run: Run, world: World) -> None:
    world.upload(NEXT)
    result = run("skip", f"{world.uri}/{NEXT}", "--yes")
    assert result.exit_code == 2
    assert "unordered table" in one_error_line(result)


def test_skip_of_a_batch_not_queued_yet_still_records_it(run: Run, ordered: World) -> None:
    """Its event has not arrived: the record keeps the subscriber's listing from queuing it."""
    generation = ordered.upload(NEXT)
    result = run("skip", f"{ordered.uri}/{NEXT}", "--yes")
    assert result.exit_code == 0, result.output
    assert "it had no pointer queued" in result.stdout
    record = result_of(ordered, NEXT, generation)
    assert record is not None and record.outcome is BatchOutcome.FAILED
    assert record.finished_at is not None and record.finished_at <= datetime.now(UTC)


@pytest.mark.parametrize("locked_before", [True, False])
def test_a_subscriber_that_listed_the_pointer_before_the_skip_cannot_lock_it(
    run: Run, ordered: World, locked_before: bool
) -> None:
    """A subscriber reads the lock, lists the backlog (the pointer is still there), then locks from
    the generation it read: the skip rewrote the lock after deleting the pointer, so that lock is
    refused and the subscriber lists again, without the batch."""
    if locked_before:  # a table that has run jobs: its lock exists, FREE
        ordered.store.write(ordered.table.lock, Lock(state=LockState.FREE).encode())
    ordered.queue(NEXT)
    seen = ordered.store.stat(ordered.table.lock)
    read_generation = 0 if seen is None else seen.generation
    result = run("skip", f"{ordered.uri}/{NEXT}", "--yes")
    assert result.exit_code == 0, result.output
    fenced = ordered.store.stat(ordered.table.lock)
    assert fenced is not None and fenced.generation != read_generation
    stale = Lock(
        state=LockState.RUNNING,
        job_id="j",
        covers=(CoveredBatch(rel=NEXT, success_generation=1, pointer="p", pointer_generation=1),),
    )
    with pytest.raises(PreconditionFailed):
        if read_generation == 0:
            ordered.store.create(ordered.table.lock, stale.encode())
        else:
            ordered.store.replace(ordered.table.lock, stale.encode(), if_generation=read_generation)
    after = ordered.store.read(ordered.table.lock)
    assert after is not None and Lock.decode(after.data, "lock").state is LockState.FREE


def test_the_drop_record_keeps_a_failed_batchs_counts_and_never_replaces_a_commit(ordered: World) -> None:
    from turnstile.protocol import operator

    generation = ordered.upload(NEXT)
    ordered.result(NEXT, generation, outcome=BatchOutcome.FAILED, rows=3, bad_rows=2)
    why = "dropped by an operator (turnstile skip), not applied: boom"
    assert operator.record_dropped(ordered.inv, ordered.table, NEXT, generation, job_id=None, error=why)
    marked = result_of(ordered, NEXT, generation)
    assert marked is not None and marked.error == why and marked.bad_rows == 2 and marked.rows_read == 5
    # A batch its job committed meanwhile: the commit stays in the history, and the skip is refused.
    ordered.result(APPLIED, generation := ordered.upload(APPLIED))
    assert not operator.record_dropped(
        ordered.inv, ordered.table, APPLIED, generation, job_id=None, error=why
    )
    kept = result_of(ordered, APPLIED, generation)
    assert kept is not None and kept.outcome is BatchOutcome.COMMITTED


def test_skip_refuses_the_head_while_its_transient_failure_waits_for_its_retry(
    run: Run, ordered: World
) -> None:
    """Its job may have committed it before it failed: the retry finds that out, a skip would hide it."""
    generation = ordered.queue(HEAD)
    ordered.queue(NEXT)
    retrying = Lock(state=LockState.FREE, attempt=1, retry_at=datetime.now(UTC))
    ordered.store.write(ordered.table.lock, retrying.encode())
    result = run("skip", f"{ordered.uri}/{HEAD}", "--yes")
    assert result.exit_code == 2
    assert "failed for a transient reason" in one_error_line(result)
    assert result_of(ordered, HEAD, generation) is None
    assert run("skip", f"{ordered.uri}/{NEXT}", "--yes").exit_code == 0  # behind the head: fine


def test_skip_of_a_mistyped_batch_says_nothing_is_stored_there(run: Run, ordered: World) -> None:
    result = run("skip", f"gs://{ordered.store.bucket}/sales/ordres/{NEXT}", "--yes")
    assert result.exit_code == 2
    assert "nothing is stored under" in one_error_line(result) and "no batch there" in one_error_line(result)
