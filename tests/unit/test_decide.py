"""The subscriber's pure decision (turnstile.protocol.decide): every action for every lock state."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstile.core.errors import CorruptState
from turnstile.jobs.port import JobState, JobStatus
from turnstile.protocol.decide import (
    Acquire,
    Action,
    Backoff,
    Blocked,
    Finish,
    Gated,
    Idle,
    Late,
    Paused,
    PointerRef,
    Submit,
    View,
    Wait,
    decide,
)
from turnstile.state.records import BatchOutcome, CancelChoice, CoveredBatch, Lock, LockState

JOB = "turnstile-ds-tbl-0123456789abcdef"
COMMITTED, SKIPPED, FAILED = BatchOutcome.COMMITTED, BatchOutcome.SKIPPED, BatchOutcome.FAILED
FINISHED_STATES = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]
UNFINISHED_STATES = [JobState.PENDING, JobState.RUNNING, JobState.CANCELLING]


def covered(rel: str, generation: int = 1) -> CoveredBatch:
    return CoveredBatch(
        rel=rel,
        pointer=f"ds/tbl/_backlog/{rel}/_SUCCESS",
        pointer_generation=100 + generation,
        success_generation=generation,
    )


def ref(rel: str, generation: int = 1) -> PointerRef:
    return PointerRef(f"ds/tbl/_backlog/{rel}/_SUCCESS", generation, rel)


COVERS = (covered("b1"), covered("b2"), covered("b3"))
HEAD = (ref("b1"), ref("b2"))


def running(covers: tuple[CoveredBatch, ...] = COVERS) -> Lock:
    return Lock(state=LockState.RUNNING, job_id=JOB, covers=covers)


def failed_lock() -> Lock:
    return Lock(state=LockState.FAILED, job_id=JOB, covers=COVERS, error="boom", failed_rel="b2")


def ended(
    state: JobState = JobState.SUCCEEDED,
    outcomes: Mapping[str, BatchOutcome] | None = None,
    detail: str | None = None,
    covers: tuple[CoveredBatch, ...] = COVERS,
) -> Action:
    return decide(View(running(covers), head=HEAD, job=JobStatus(JOB, state, detail), outcomes=outcomes))


# --- FAILED lock -------------------------------------------------------------------------------------


@pytest.mark.parametrize("job_state", [None, *JobState])
@pytest.mark.parametrize("head", [(), HEAD])
def test_failed_lock_is_blocked_whatever_else_was_read(job_state: JobState | None, head: tuple) -> None:
    view = View(
        failed_lock(),
        head=head,
        job=None if job_state is None else JobStatus(JOB, job_state, "x"),
        outcomes={"b1": COMMITTED},
        gate_open=False,
        may_start=False,
        head_is_late=True,
    )
    assert decide(view) == Blocked()


def test_failed_lock_is_blocked_with_an_otherwise_ready_view() -> None:
    assert decide(View(failed_lock(), head=HEAD)) == Blocked()


# --- RUNNING lock ------------------------------------------------------------------------------------


def test_running_lock_whose_job_is_unknown_is_submitted() -> None:
    assert decide(View(running(), head=HEAD, job=None)) == Submit(JOB)


@pytest.mark.parametrize("state", UNFINISHED_STATES)
def test_running_lock_with_an_unfinished_job_waits(state: JobState) -> None:
    view = View(running(), head=HEAD, job=JobStatus(JOB, state), outcomes={r.rel: COMMITTED for r in COVERS})
    assert decide(view) == Wait(JOB)


@pytest.mark.parametrize("state", FINISHED_STATES)
def test_running_lock_with_a_finished_job_finishes(state: JobState) -> None:
    action = ended(state, {"b1": COMMITTED, "b2": COMMITTED, "b3": COMMITTED})
    assert action == Finish(COVERS, None, None)


@pytest.mark.parametrize("state", [s for s in JobState], ids=lambda s: f"{s.value}-finished={s.finished}")
def test_every_job_state_maps_to_wait_or_finish(state: JobState) -> None:
    action = ended(state, {r.rel: COMMITTED for r in COVERS})
    assert isinstance(action, Finish if state in FINISHED_STATES else Wait)
    assert state.finished is (state in FINISHED_STATES)


def test_running_lock_ignores_gate_pause_and_lateness() -> None:
    base = {"head": HEAD, "gate_open": False, "may_start": False, "head_is_late": True}
    assert decide(View(running(), job=None, **base)) == Submit(JOB)
    assert decide(View(running(), job=JobStatus(JOB, JobState.RUNNING), **base)) == Wait(JOB)
    done = View(
        running(),
        job=JobStatus(JOB, JobState.SUCCEEDED),
        outcomes={r.rel: COMMITTED for r in COVERS},
        **base,
    )
    assert decide(done) == Finish(COVERS, None, None)


def test_a_job_the_service_does_not_have_waits_for_its_retry_the_resume_or_ends_cancelled() -> None:
    assert decide(View(running(), head=HEAD, job=None, backing_off=True)) == Backoff()
    assert decide(View(running(), head=HEAD, job=None, paused=True)) == Paused()
    cancelled = running().model_copy(update={"cancel": CancelChoice.BLOCK})
    action = decide(View(cancelled, head=HEAD, job=None, paused=True, backing_off=True))
    assert isinstance(action, Finish) and action.applied == () and action.failed == COVERS[0]
    assert action.error == f"job {JOB} was cancelled by an operator before applying 'b1'"


def test_a_job_cancelled_without_a_word_points_at_the_timeout() -> None:
    action = ended(JobState.CANCELLED, {"b1": COMMITTED})
    assert isinstance(action, Finish) and action.failed == COVERS[1] and action.transient
    assert action.error is not None and "ended CANCELLED before applying 'b2'" in action.error
    assert "job_timeout_seconds" in action.error


def test_a_batch_the_job_left_no_record_of_may_be_committed_one_it_recorded_failed_is_not() -> None:
    died = ended(JobState.FAILED, {"b1": COMMITTED}, detail="the machine was lost")
    assert isinstance(died, Finish) and died.failed == COVERS[1] and died.unrecorded
    failed = ended(JobState.FAILED, {"b1": COMMITTED, "b2": FAILED}, detail="spark said no")
    assert isinstance(failed, Finish) and failed.failed == COVERS[1] and not failed.unrecorded
    never = running().model_copy(update={"cancel": CancelChoice.REQUEUE})
    action = decide(View(never, head=HEAD, job=None))
    assert isinstance(action, Finish) and action.never_ran and not action.unrecorded


def test_running_lock_without_a_job_id_is_a_protocol_violation() -> None:
    with pytest.raises(CorruptState, match="names no job"):
        decide(View(Lock(state=LockState.RUNNING), head=HEAD))


# --- Finish: which batches count as applied ---------------------------------------------------------


def test_all_committed_applies_every_batch() -> None:
    action = ended(outcomes={"b1": COMMITTED, "b2": COMMITTED, "b3": COMMITTED})
    assert action == Finish(applied=COVERS, failed=None, error=None)


def test_skipped_counts_as_applied() -> None:
    action = ended(outcomes={"b1": SKIPPED, "b2": COMMITTED, "b3": SKIPPED})
    assert action == Finish(applied=COVERS, failed=None, error=None)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_failure_at_batch_k_of_n_applies_the_first_k_minus_1(n: int) -> None:
    covers = tuple(covered(f"b{i}", i) for i in range(1, n + 1))
    for k in range(1, n + 1):
        outcomes = {c.rel: COMMITTED for c in covers[: k - 1]} | {covers[k - 1].rel: FAILED}
        action = ended(JobState.FAILED, outcomes, detail="spark said no", covers=covers)
        assert action == Finish(applied=covers[: k - 1], failed=covers[k - 1], error="spark said no")


def test_outcomes_after_the_failed_batch_do_not_count() -> None:
    # A later batch reported COMMITTED after an earlier failure cannot be applied out of order.
    action = ended(JobState.FAILED, {"b1": COMMITTED, "b2": FAILED, "b3": COMMITTED}, detail="x")
    assert isinstance(action, Finish)
    assert action.applied == COVERS[:1]
    assert action.failed == COVERS[1]


def test_error_text_comes_from_the_job_detail() -> None:
    action = ended(JobState.FAILED, {"b1": FAILED}, detail="AnalysisException: no such column")
    assert isinstance(action, Finish)
    assert action.error == "AnalysisException: no such column"


@pytest.mark.parametrize("detail", [None, ""])
@pytest.mark.parametrize("state", FINISHED_STATES)
def test_default_error_names_the_job_its_state_and_the_rel(detail: str | None, state: JobState) -> None:
    action = ended(state, {"b1": COMMITTED, "b2": FAILED}, detail=detail)
    assert isinstance(action, Finish)
    assert action.failed == COVERS[1]
    assert action.error is not None
    assert "'b2'" in action.error
    assert JOB in action.error
    assert state.value in action.error


def test_missing_outcome_counts_as_not_applied() -> None:
    action = ended(JobState.SUCCEEDED, {"b1": COMMITTED, "b3": COMMITTED})
    assert isinstance(action, Finish)
    assert action.applied == COVERS[:1]
    assert action.failed == COVERS[1]
    assert action.error is not None and "'b2'" in action.error


@pytest.mark.parametrize("outcomes", [None, {}])
def test_no_outcomes_at_all_fails_at_the_first_batch(outcomes: dict | None) -> None:
    action = ended(JobState.SUCCEEDED, outcomes)
    assert isinstance(action, Finish)
    assert action.applied == ()
    assert action.failed == COVERS[0]
    assert action.error is not None and "'b1'" in action.error


def test_outcomes_of_other_rels_are_ignored() -> None:
    action = ended(outcomes={"zz": COMMITTED, "b1": COMMITTED, "b2": COMMITTED, "b3": COMMITTED})
    assert action == Finish(COVERS, None, None)


def test_finished_job_of_an_empty_lock_frees_it() -> None:
    assert ended(outcomes={}, covers=()) == Finish((), None, None)


# --- FREE lock ---------------------------------------------------------------------------------------


def free(**kwargs: object) -> Action:
    return decide(View(Lock(), **{"head": HEAD, **kwargs}))  # type: ignore[arg-type]


def test_free_lock_with_a_head_acquires_all_of_it() -> None:
    assert free() == Acquire(HEAD)
    assert free(head=HEAD[:1]) == Acquire(HEAD[:1])


def test_free_lock_ignores_job_and_outcomes() -> None:
    assert free(job=JobStatus(JOB, JobState.FAILED, "x"), outcomes={"b1": FAILED}) == Acquire(HEAD)


def test_free_lock_with_an_empty_head_is_idle() -> None:
    assert free(head=()) == Idle()


@pytest.mark.parametrize("head", [(), HEAD])
def test_closed_gate_comes_first(head: tuple) -> None:
    assert free(head=head, gate_open=False) == Gated()
    assert free(head=head, gate_open=False, head_is_late=True, may_start=False) == Gated()


def test_paused_when_may_not_start() -> None:
    assert free(may_start=False) == Paused()


def test_paused_with_nothing_queued_is_idle() -> None:
    assert free(head=(), may_start=False) == Idle()


def test_late_head_is_reported_before_it_is_acquired() -> None:
    assert free(head_is_late=True) == Late(HEAD[0])
    assert free(head_is_late=True, may_start=False) == Late(HEAD[0])


def test_late_flag_on_an_empty_head_is_idle() -> None:
    assert free(head=(), head_is_late=True) == Idle()


# --- invariants over random views --------------------------------------------------------------------

_rels = st.lists(st.sampled_from([f"b{i}" for i in range(8)]), unique=True, max_size=6)


@st.composite
def views(draw: st.DrawFn) -> View:
    state = draw(st.sampled_from(LockState))
    covers = tuple(covered(r, i + 1) for i, r in enumerate(draw(_rels)))
    lock = Lock(
        state=state,
        job_id=JOB if state is LockState.RUNNING else draw(st.none() | st.just(JOB)),
        covers=covers,
    )
    job_state = draw(st.none() | st.sampled_from(JobState))
    job = None if job_state is None else JobStatus(JOB, job_state, draw(st.none() | st.text(max_size=5)))
    outcomes = draw(
        st.none()
        | st.dictionaries(st.sampled_from([f"b{i}" for i in range(8)]), st.sampled_from(BatchOutcome))
    )
    head = tuple(ref(r, i + 1) for i, r in enumerate(draw(_rels)))
    return View(
        lock=lock,
        head=head,
        job=job,
        outcomes=outcomes,
        gate_open=draw(st.booleans()),
        may_start=draw(st.booleans()),
        head_is_late=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None)
@given(views())
def test_invariants_of_random_views(view: View) -> None:
    action = decide(view)
    lock = view.lock
    if lock.state is LockState.FAILED:
        assert action == Blocked()
    if isinstance(action, Acquire):
        assert lock.state is LockState.FREE
        assert action.covers == view.head and action.covers
        assert view.gate_open and view.may_start and not view.head_is_late
    if isinstance(action, Wait | Submit):
        assert lock.state is LockState.RUNNING
        assert (view.job is None) is isinstance(action, Submit)
    if isinstance(action, Gated | Idle | Paused | Late) or False:
        assert lock.state is LockState.FREE
    if isinstance(action, Finish):
        assert lock.state is LockState.RUNNING
        assert view.job is not None and view.job.state.finished
        n = len(action.applied)
        assert action.applied == lock.covers[:n]  # always a prefix
        outcomes = view.outcomes or {}
        assert all(outcomes.get(c.rel) in (COMMITTED, SKIPPED) for c in action.applied)
        if action.failed is None:
            assert action.applied == lock.covers
            assert action.error is None
        else:
            assert action.failed == lock.covers[n]
            assert outcomes.get(action.failed.rel) not in (COMMITTED, SKIPPED)
            assert action.error  # never empty: the job's detail or a default naming the rel


# --- dependencies ------------------------------------------------------------------------------------


def test_a_head_waiting_for_dependencies_is_not_acquired() -> None:
    from turnstile.protocol.decide import Waiting

    reasons = ("ds/a to reach 2026-01-01T04:00:00+00:00 (its watermark: none yet)",)
    assert decide(View(Lock(), head=HEAD, waiting_for=reasons)) == Waiting(reasons)
    assert decide(View(Lock(), head=HEAD)) == Acquire(HEAD)


def test_waiting_never_hides_a_failed_lock_a_running_job_or_a_late_head() -> None:
    reasons = ("the delay until 2026-01-01T04:15:00+00:00",)
    assert decide(View(failed_lock(), head=(), waiting_for=reasons)) == Blocked()
    assert decide(View(running(), head=(), job=None, waiting_for=reasons)) == Submit(JOB)
    late = decide(View(Lock(position="b9"), head=HEAD, head_is_late=True, waiting_for=reasons))
    assert late == Late(HEAD[0])
