"""The sweeper's pure verdict per table (turnstile.protocol.sweeper.verdict), table-driven."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnstile.protocol.sweeper import SweepFacts as TableState
from turnstile.protocol.sweeper import verdict
from turnstile.state.records import LockState

LEASE = 540.0
YOUNG = LEASE / 2
OLD = LEASE * 3

# A FREE table with a backlog, a _BACKFILL old enough that its event must have arrived, nobody
# holding its claim, not paused and not gated: the one state that needs waking.
STALE = TableState(
    lock_state=LockState.FREE,
    lock_age=OLD,
    job_finished=None,
    backlog=True,
    backfill_age=OLD,
    backfill_claimed_live=False,
    paused=False,
    gated=False,
)


def running(**changes: object) -> TableState:
    return replace(STALE, lock_state=LockState.RUNNING, **changes)  # type: ignore[arg-type]


def free(**changes: object) -> TableState:
    return replace(STALE, **changes)  # type: ignore[arg-type]


CASES: dict[str, tuple[TableState, str]] = {
    # FAILED: never unlocked by the sweeper, whatever else holds.
    "failed": (replace(STALE, lock_state=LockState.FAILED), "blocked"),
    "failed-young-no-backlog": (
        replace(STALE, lock_state=LockState.FAILED, lock_age=1.0, backlog=False, backfill_age=None),
        "blocked",
    ),
    "failed-job-finished": (replace(STALE, lock_state=LockState.FAILED, job_finished=True), "blocked"),
    "failed-paused-gated-live": (
        replace(STALE, lock_state=LockState.FAILED, paused=True, gated=True, backfill_claimed_live=True),
        "blocked",
    ),
    # RUNNING: wake when its job ended (the done signal was lost), or the locker died before submitting.
    "running-job-finished": (running(job_finished=True), "wake"),
    "running-job-finished-young-lock": (running(job_finished=True, lock_age=1.0), "wake"),
    "running-job-finished-live-claim-no-backlog": (
        running(job_finished=True, backfill_claimed_live=True, backlog=False, backfill_age=1.0),
        "wake",
    ),
    "running-job-finished-while-paused-gated": (running(job_finished=True, paused=True, gated=True), "wake"),
    "running-job-live-old-lock": (running(job_finished=False, lock_age=OLD), "ok"),
    "running-job-live-young-lock": (running(job_finished=False, lock_age=1.0), "ok"),
    "running-never-submitted-old-lock": (running(job_finished=None, lock_age=OLD), "wake"),
    "running-never-submitted-no-backlog": (
        running(job_finished=None, lock_age=OLD, backlog=False, backfill_age=None),
        "wake",
    ),
    "running-never-submitted-young-lock": (running(job_finished=None, lock_age=YOUNG), "ok"),
    "running-never-submitted-lock-age-equals-lease": (running(job_finished=None, lock_age=LEASE), "ok"),
    "running-never-submitted-unknown-age": (running(job_finished=None, lock_age=None), "ok"),
    # FREE: nothing to do without a backlog, while paused or behind a closed gate.
    "free-stale": (STALE, "wake"),
    "free-empty-backlog": (free(backlog=False), "ok"),
    "free-empty-backlog-no-backfill": (free(backlog=False, backfill_age=None), "ok"),
    "free-paused": (free(paused=True), "ok"),
    "free-gated": (free(gated=True), "ok"),
    "free-gated-no-backfill": (free(gated=True, backfill_age=None), "ok"),
    "free-paused-no-backfill": (free(paused=True, backfill_age=None), "ok"),
    # FREE with a backlog: wake when no _BACKFILL would start a run.
    "free-no-backfill": (free(backfill_age=None), "wake"),
    "free-no-backfill-young-lock": (free(backfill_age=None, lock_age=1.0), "wake"),
    # ... but not when a run holds its claim or its event may still be on the way.
    "free-claim-live": (free(backfill_claimed_live=True), "ok"),
    "free-claim-live-young": (free(backfill_claimed_live=True, backfill_age=1.0), "ok"),
    "free-backfill-young": (free(backfill_age=YOUNG), "ok"),
    "free-backfill-brand-new": (free(backfill_age=0.0), "ok"),
    "free-backfill-age-equals-lease": (free(backfill_age=LEASE), "wake"),
    "free-backfill-just-past-lease": (free(backfill_age=LEASE + 0.001), "wake"),
    # A FREE lock's job and lock age do not matter.
    "free-stale-with-finished-job-field": (free(job_finished=True, lock_age=1.0), "wake"),
}


@pytest.mark.parametrize(("state", "expected"), list(CASES.values()), ids=list(CASES))
def test_verdict(state: TableState, expected: str) -> None:
    assert verdict(state, LEASE) == expected


def test_lease_decides_how_old_is_stale() -> None:
    state = free(backfill_age=100.0)
    assert verdict(state, lease=200.0) == "ok"
    assert verdict(state, lease=50.0) == "wake"
    never_submitted = running(job_finished=None, lock_age=100.0)
    assert verdict(never_submitted, lease=200.0) == "ok"
    assert verdict(never_submitted, lease=50.0) == "wake"


ages = st.none() | st.floats(min_value=0, max_value=10 * LEASE)
states = st.builds(
    TableState,
    lock_state=st.sampled_from(LockState),
    lock_age=ages,
    job_finished=st.none() | st.booleans(),
    backlog=st.booleans(),
    backfill_age=ages,
    backfill_claimed_live=st.booleans(),
    paused=st.booleans(),
    gated=st.booleans(),
)


@given(states)
def test_verdict_invariants(state: TableState) -> None:
    decided = verdict(state, LEASE)
    assert decided in ("blocked", "wake", "ok")
    assert (decided == "blocked") is (state.lock_state is LockState.FAILED)
    if state.lock_state is LockState.FREE and decided == "wake":
        assert state.backlog and not state.paused and not state.gated
        assert state.backfill_age is None or not state.backfill_claimed_live
    if state.lock_state is LockState.RUNNING and state.job_finished is False:
        assert decided == "ok"  # a live job is never disturbed


def test_a_head_waiting_for_dependencies_is_not_woken_until_its_wait_ends() -> None:
    from dataclasses import replace

    from turnstile.protocol.sweeper import SweepFacts, Verdict, verdict
    from turnstile.state.records import LockState

    waiting = SweepFacts(
        lock_state=LockState.FREE,
        lock_age=10.0,
        job_finished=None,
        backlog=True,
        backfill_age=None,
        backfill_claimed_live=False,
        paused=False,
        gated=False,
        waiting=True,
    )
    assert verdict(waiting, 540) is Verdict.OK
    assert verdict(replace(waiting, waiting=False), 540) is Verdict.WAKE
