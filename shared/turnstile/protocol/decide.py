"""The subscriber's decisions: pure functions of what was read, no I/O.

`decide(view)` looks at the lock, the backlog head, the job's state and its outcomes, and names the
one next step. The subscriber performs that step with generation preconditions and decides again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from turnstile.core.errors import CorruptState
from turnstile.jobs.port import JobState, JobStatus
from turnstile.protocol import retries
from turnstile.state.records import APPLIED_OUTCOMES, BatchOutcome, CoveredBatch, Lock, LockState


@dataclass(frozen=True)
class PointerRef:
    name: str
    generation: int
    rel: str


@dataclass(frozen=True)
class View:
    """What the subscriber read before deciding."""

    lock: Lock
    head: tuple[PointerRef, ...]  # the first pointers of the backlog, in order
    job: JobStatus | None = None  # state of lock.job_id, when the lock is RUNNING
    outcomes: Mapping[str, BatchOutcome] | None = None  # rel -> outcome, once the job finished
    gate_open: bool = True
    may_start: bool = True  # False under WAIT_FOR_VALIDATION until a new _BACKFILL arrives
    head_is_late: bool = False  # the head sorts before a batch already applied
    head_applied: bool = False  # the head's very `_SUCCESS` generation is already committed
    backing_off: bool = False  # a transient failure's retry is not due yet
    paused: bool = False  # an operator paused the table (`turnstile pause`)
    reprocess: PointerRef | None = None  # an operator's reprocess request, due: queued before the head
    reprocess_after: str | None = None  # a request waits behind this pointer: no job covers past it
    waiting_for: tuple[str, ...] = ()  # the head waits for dependencies' watermarks or its delay


@dataclass(frozen=True)
class Blocked:
    """A FAILED lock: stop; only a human unlocks."""


@dataclass(frozen=True)
class Gated:
    """START_BACKFILL_FILENAME is configured and missing: batches only queue."""


@dataclass(frozen=True)
class Idle:
    """Nothing held and nothing queued: the subscriber may exit."""


@dataclass(frozen=True)
class Paused:
    """WAIT_FOR_VALIDATION: the next job waits for a new `_BACKFILL`."""


@dataclass(frozen=True)
class Waiting:
    """The head batch waits for dependencies' watermarks or its delay: batches stay queued; a
    dependency's commit (or the sweeper) wakes the table."""

    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Backoff:
    """A job failed for a transient reason; its retry is not due yet (the sweeper wakes the table)."""


@dataclass(frozen=True)
class Wait:
    """The job is still running; its done signal (or the sweeper) wakes the subscriber."""

    job_id: str


@dataclass(frozen=True)
class Submit:
    """The lock names a job the runner does not know (a crash after locking): submit it now."""

    job_id: str


@dataclass(frozen=True)
class Drop:
    """The head is a copy of a batch already applied (a duplicate event delivered late): remove
    its pointer, apply nothing."""

    head: PointerRef


@dataclass(frozen=True)
class Late:
    """The head batch arrived after a later batch was applied: applying it would break the order."""

    head: PointerRef


@dataclass(frozen=True)
class Acquire:
    """Lock the table for a job covering the first of these pointers, in order (as many as the
    head batch's `max_batches_per_job` allows)."""

    covers: tuple[PointerRef, ...]


@dataclass(frozen=True)
class Reprocess:
    """Lock the table for a job that commits an already committed batch once more (`turnstile
    reprocess`): everything queued before the request is applied."""

    request: PointerRef


@dataclass(frozen=True)
class Finish:
    """The job ended: remove the pointers of `applied`; free the lock or fail it at `failed`."""

    applied: tuple[CoveredBatch, ...]
    failed: CoveredBatch | None
    error: str | None
    transient: bool = False  # the job never recorded why `failed` failed: retrying may help
    # Cancelled before the job service ever had the job: a submit still on its way (an invocation
    # that read the lock before the cancel) must find nothing to run before the lock moves on.
    never_ran: bool = False
    # The job left no record of `failed`: it may have committed it before it died or was cancelled.
    unrecorded: bool = False


Action = (
    Blocked
    | Gated
    | Idle
    | Paused
    | Waiting
    | Backoff
    | Wait
    | Submit
    | Drop
    | Late
    | Acquire
    | Reprocess
    | Finish
)


def decide(view: View) -> Action:
    lock = view.lock
    if lock.state is LockState.FAILED:
        return Blocked()
    if lock.state is LockState.RUNNING:
        if lock.job_id is None:
            raise CorruptState("a RUNNING lock names no job; it was not written by turnstile")
        if view.job is None:  # the job service does not have the lock's job
            if lock.cancel is not None:  # cancelled before it ever ran: its batches were not applied
                cancelled = JobStatus(lock.job_id, JobState.CANCELLED, None)
                return replace(_finish(lock, cancelled, {}), never_ran=True, unrecorded=False)
            if view.paused:
                return Paused()
            return Backoff() if view.backing_off else Submit(lock.job_id)
        if not view.job.state.finished:
            return Wait(lock.job_id)
        return _finish(lock, view.job, view.outcomes or {})
    if not view.gate_open:
        return Gated()
    if view.reprocess is not None:
        if view.paused:
            return Paused()
        return Backoff() if view.backing_off else Reprocess(view.reprocess)
    if not view.head:
        return Idle()
    if view.head_applied:
        return Drop(view.head[0])
    if view.head_is_late:
        return Late(view.head[0])
    if not view.may_start or view.paused:
        return Paused()
    if view.backing_off:
        return Backoff()
    if view.waiting_for:
        return Waiting(view.waiting_for)
    barrier = view.reprocess_after
    return Acquire(tuple(h for h in view.head if barrier is None or h.name <= barrier))


_APPLIED = APPLIED_OUTCOMES
# A reprocess's job commits it as REPROCESSED (a rebuild of a derived step as REBUILT), or finds its
# own commit there (SKIPPED) when retried.
_REPROCESSED = (BatchOutcome.REPROCESSED, BatchOutcome.REBUILT, BatchOutcome.SKIPPED)


def _finish(lock: Lock, job: JobStatus, outcomes: Mapping[str, BatchOutcome]) -> Finish:
    """Batches count as applied in order up to the first one the job did not commit or skip."""
    applied: list[CoveredBatch] = []
    for covered in lock.covers:
        outcome = outcomes.get(covered.rel)
        if outcome not in (_REPROCESSED if covered.reprocess else _APPLIED):
            error = job.detail or f"job {job.job_id} ended {job.state.value} before applying {covered.rel!r}"
            if job.state is JobState.CANCELLED and not job.detail:
                error += (
                    " (the sweeper cancels a job that runs past job_timeout_seconds: raise it in load.json "
                    "if the batch needs longer; else it was cancelled on the job service)"
                )
            if lock.cancel is not None:
                error = f"job {job.job_id} was cancelled by an operator before applying {covered.rel!r}"
            recorded = outcome is BatchOutcome.FAILED or lock.cancel is not None  # not retried by itself
            transient = retries.kind(recorded) is retries.FailureKind.TRANSIENT
            return Finish(tuple(applied), covered, error, transient, unrecorded=outcome is None)
        applied.append(covered)
    return Finish(tuple(applied), None, None)
