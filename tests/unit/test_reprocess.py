"""The pure parts of `turnstile reprocess`: the subscriber's decision, the job id, the commit key,
the job's outcome and result record, and where the history puts a reprocess."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.unit.test_decide import HEAD, JOB, covered, ref
from tests.unit.test_execution import NOW, TABLE, FixedClock, manifest, mbatch
from turnstile.jobs.inline import MemoryTables
from turnstile.jobs.port import JobState, JobStatus
from turnstile.ops import history as history_ops
from turnstile.protocol import reprocess
from turnstile.protocol.decide import (
    Acquire,
    Backoff,
    Blocked,
    Finish,
    Idle,
    Paused,
    PointerRef,
    Reprocess,
    View,
    decide,
)
from turnstile.protocol.jobids import ordered_job_id, reprocess_job_id
from turnstile.spark.commits import batch_key
from turnstile.state.execution import execute
from turnstile.state.records import BatchOutcome, BatchResult, CoveredBatch, Lock, LockState
from turnstile.store.memory import MemoryStore

REQUEST = PointerRef("ds/tbl/_turnstile/reprocess/20240501T120000000000Z-0a1b2c3d.json", 7, "")


def as_reprocess(c: CoveredBatch) -> CoveredBatch:
    return c.model_copy(update={"reprocess": True, "pointer": REQUEST.name, "pointer_generation": 7})


def test_a_due_request_is_taken_before_the_head_and_waits_for_pause_and_backoff() -> None:
    assert decide(View(lock=Lock(), head=HEAD, reprocess=REQUEST)) == Reprocess(REQUEST)
    assert decide(View(lock=Lock(), head=(), reprocess=REQUEST)) == Reprocess(REQUEST)
    assert decide(View(lock=Lock(), head=(), reprocess=REQUEST, paused=True)) == Paused()
    assert decide(View(lock=Lock(), head=(), reprocess=REQUEST, backing_off=True)) == Backoff()
    assert decide(View(lock=Lock(), head=())) == Idle()
    blocked = Lock(state=LockState.FAILED, job_id=JOB, covers=(covered("b1"),))
    assert decide(View(lock=blocked, head=(), reprocess=REQUEST)) == Blocked()


def test_a_waiting_request_stops_the_next_job_at_the_last_pointer_queued_before_it() -> None:
    head = (ref("b1"), ref("b2"), ref("b3"))
    assert decide(View(lock=Lock(), head=head, reprocess_after=head[1].name)) == Acquire(head[:2])
    assert decide(View(lock=Lock(), head=head)) == Acquire(head)


def test_a_reprocess_counts_as_applied_only_when_reprocessed_and_a_batch_only_when_committed() -> None:
    done = JobStatus(JOB, JobState.SUCCEEDED)
    mine = as_reprocess(covered("b1"))
    held = Lock(state=LockState.RUNNING, job_id=JOB, covers=(mine,))
    for outcome in (BatchOutcome.REPROCESSED, BatchOutcome.SKIPPED):
        assert decide(View(lock=held, head=(), job=done, outcomes={"b1": outcome})) == Finish(
            (mine,), None, None
        )
    finish = decide(View(lock=held, head=(), job=done, outcomes={"b1": BatchOutcome.COMMITTED}))
    assert isinstance(finish, Finish) and finish.failed == mine  # not what a reprocess job writes
    plain = Lock(state=LockState.RUNNING, job_id=JOB, covers=(covered("b1"),))
    finish = decide(View(lock=plain, head=(), job=done, outcomes={"b1": BatchOutcome.REPROCESSED}))
    assert isinstance(finish, Finish) and finish.failed == covered("b1")


def test_the_job_id_is_its_own_per_request_and_acquisition() -> None:
    first = reprocess_job_id("turnstile", TABLE, REQUEST.name, 7, 3)
    assert first == reprocess_job_id("turnstile", TABLE, REQUEST.name, 7, 3)  # a duplicate attaches
    assert first.startswith("turnstile-ds-tbl-p") and len(first) <= 63
    others = {
        reprocess_job_id("turnstile", TABLE, REQUEST.name, 8, 3),
        reprocess_job_id("turnstile", TABLE, REQUEST.name + "x", 7, 3),
        reprocess_job_id("turnstile", TABLE, REQUEST.name, 7, 4),
        reprocess_job_id("turnstile", TABLE, REQUEST.name, 7, 3, reuse=1),
        ordered_job_id("turnstile", TABLE, REQUEST.name, 7, 3),
    }
    assert first not in others and len(others) == 5


def test_the_commit_key_of_a_reprocess_is_its_own() -> None:
    assert batch_key("2024/05/01", 5) == "2024/05/01#5"
    assert batch_key("2024/05/01", 5, "r1") == "2024/05/01#5#reprocess-r1"


def test_request_ids_sort_by_time_and_results_sit_next_to_the_batch_record() -> None:
    at = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    early = reprocess.new_request_id(at, "ds/tbl/b9/_SUCCESS")
    late = reprocess.new_request_id(datetime(2024, 5, 1, 12, 0, 1, tzinfo=UTC), "ds/tbl/b1/_SUCCESS")
    assert early < late and early == reprocess.new_request_id(at, "ds/tbl/b9/_SUCCESS")
    assert early != reprocess.new_request_id(at, "ds/tbl/b9/_SUCCESS", attempt=1)
    name = reprocess.request_name(TABLE, early)
    assert name.startswith(reprocess.folder(TABLE)) and reprocess.request_id_of(name) == early
    assert (
        reprocess.result_name(TABLE, "b1", 5, early)
        == f"ds/tbl/_turnstile/results/b1/5.reprocess-{early}.json"
    )


def test_the_job_commits_a_reprocess_once_more_once_and_records_it_apart() -> None:
    store, tables = MemoryStore("bkt"), MemoryTables()
    original = mbatch("b1", 5)
    execute(store, manifest(original), tables, FixedClock())
    again = original.model_copy(
        update={"reprocess": "r1", "result": reprocess.result_name(TABLE, "b1", 5, "r1")}
    )
    done = execute(store, manifest(again), tables, FixedClock())
    assert done.outcomes == {"b1": BatchOutcome.REPROCESSED}
    retried = execute(store, manifest(again), tables, FixedClock())  # the same job run again
    assert retried.outcomes == {"b1": BatchOutcome.SKIPPED}
    assert tables.commits[TABLE.prefix] == [("b1", 5), ("b1", 5)]
    kept = store.read(again.result)
    assert kept is not None and BatchResult.decode(kept.data, "r").outcome is BatchOutcome.REPROCESSED
    first = store.read(original.result)
    assert first is not None and BatchResult.decode(first.data, "o").outcome is BatchOutcome.COMMITTED
    found = history_ops.history(store, TABLE, success_filename="_SUCCESS", last=None)
    assert [(e.rel, e.outcome) for e in found.entries] == [("b1", "COMMITTED"), ("b1", "REPROCESSED")]
    assert found.entries[0].finished_at == NOW
