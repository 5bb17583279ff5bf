"""The backlog subscriber: holds a table through its lock and applies the backlog in order.

Each turn reads the table's state, asks `decide` for the next step and performs it with a
generation precondition taken from what it read; a lost race just means deciding again. It never
waits for a running job: the job's done signal (or the sweeper) wakes it.
"""

from __future__ import annotations

from enum import StrEnum

from turnstile.core import logs
from turnstile.core.errors import (
    ConfigError,
    JobDeferred,
    JobError,
    JobServiceUnavailable,
    PathError,
    PreconditionFailed,
)
from turnstile.names.batchfiles import data_files
from turnstile.names.paths import Table
from turnstile.protocol import backlog, covering, lineage, lock, rebuilds, recovery, reprocess, retrying
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import (
    Acquire,
    Backoff,
    Blocked,
    Drop,
    Finish,
    Gated,
    Idle,
    Late,
    Paused,
    PointerRef,
    Reprocess,
    Submit,
    Wait,
    Waiting,
    decide,
)
from turnstile.protocol.manifests import manifest_batch, unread_files, write_manifest
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.protocol.state import TableState
from turnstile.state.records import (
    CancelChoice,
    CoveredBatch,
    Lock,
    LockState,
    Manifest,
    ManifestBatch,
    wake_body,
)
from turnstile.store.port import object_uri

log = logs.get("subscriber")
MAX_TURNS = 1000  # a turn always changes state or returns; this only guards against a bug looping


class Stopped(StrEnum):
    """What a subscriber run stopped on."""

    HANDOVER = "handover"  # near the function's deadline: a new `_BACKFILL` continues
    BLOCKED = "blocked"
    GATED = "gated"
    PAUSED = "paused"
    BACKOFF = "backoff"  # a transient failure's retry is not due yet; the sweeper wakes the table
    WAITING = "waiting"  # a job runs; its done signal wakes the table
    DEPENDENCIES = "dependencies"  # the head waits for sources' watermarks or its delay
    IDLE = "idle"


def run(inv: Invocation, table: Table) -> Stopped:
    """Drive the table until there is nothing to do now; return what it stopped on."""
    for _ in range(MAX_TURNS):
        if inv.time_left() <= 0:
            inv.store.write(table.backfill, wake_body())  # a new generation: a fresh run continues
            log.info("handing over before the function timeout", extra={"table": table.prefix})
            return Stopped.HANDOVER
        state = TableState(inv, table)
        action = decide(state.view())
        held, generation = state.lock, state.lock_generation
        if generation == 0 and isinstance(action, Acquire | Reprocess):  # new, or deleted by hand
            rebuilt = recovery.rebuild_lock(inv, table, restore=isinstance(action, Acquire))
            if rebuilt.running_job is not None:
                return Stopped.WAITING  # its done signal wakes the table
            if rebuilt.restored:
                continue  # decide again: a head at or before the position is late or applied
        match action:
            case Blocked():
                lock.log_still_blocked(inv, table, held)
                return Stopped.BLOCKED
            case Gated():
                return Stopped.GATED
            case Paused():
                return Stopped.PAUSED
            case Backoff():
                log.info(
                    "retry of a transient failure not due yet",
                    extra={"table": table.prefix, "retry_at": str(held.retry_at), "attempt": held.attempt},
                )
                return Stopped.BACKOFF
            case Wait(job_id=job_id):
                log.info("job running", extra={"table": table.prefix, "job_id": job_id})
                return Stopped.WAITING
            case Waiting(reasons=reasons):
                log.info("batch waits", extra={"table": table.prefix, "waiting_for": list(reasons)})
                lineage.settle_waiting(inv, table, state.backlog(1)[0].rel, state.backfill)
                return Stopped.DEPENDENCIES
            case Idle():
                if state.never_met and state.derived:  # no head batch to block on: the lock, then
                    lineage.block_never_met(
                        inv, table, held, generation, lineage=state.derived, error=state.never_met
                    )
                    return Stopped.BLOCKED
                if state.lineage is not None and lineage.publish_due_steps(
                    inv, table, state.lineage, held.position
                ):
                    continue  # a derived table's steps were queued: apply them
                _exit_if_empty(inv, table, state)
                return Stopped.IDLE
            case Submit(job_id=job_id):
                _submit(inv, table, held, generation, job_id)
            case Drop(head=head):
                backlog.drop(inv, table, head)
            case Late(head=head):
                _block_late(inv, table, held, generation, head)
            case Acquire(covers=covers):
                submitted = _acquire(inv, table, held, generation, covers)
                if submitted is not None and _still_running(inv, submitted):
                    # Its done signal wakes the next run: reading the lock and the done signal
                    # again now would only find it running.
                    log.info("job running", extra={"table": table.prefix, "job_id": submitted})
                    return Stopped.WAITING
            case Reprocess(request=request):
                _reprocess(inv, table, held, generation, request)
            case Finish():
                if action.never_ran and not retrying.void_unsubmitted(inv, held):
                    continue  # the job service took the job meanwhile: decide from its state
                _finish(inv, table, held, generation, action)
                lineage.after_commit(inv, table, tuple(c.rel for c in action.applied))
                if inv.settings.wait_for_validation and action.failed is None:
                    return Stopped.PAUSED
    raise RuntimeError(f"{table.uri}: the subscriber made {MAX_TURNS} turns without settling")


def _acquire(
    inv: Invocation, table: Table, held: Lock, lock_generation: int, covers: tuple[PointerRef, ...]
) -> str | None:
    """Lock the table for a job over the head of the backlog and submit it; the job's id once
    submitted, None when the next turn must decide again."""
    listed, (covers, steps) = len(covers), _coverable(inv, table, held, lock_generation, covers)
    if not covers:
        return None
    listing = backlog.pending_objects(inv, table, held.position, covers[0].rel, covers[-1].rel)
    covering.config_levels_from(inv, table, listing)
    late = backlog.unannounced(inv, table, listing, {ref.rel for ref in covers}, held.position)
    if late:  # upstream wrote these before the batches about to be covered: queue them first
        backlog.queue_unannounced(inv, late)
        return None
    # Every data file with its size, every covered `_SUCCESS` with its live generation (on S3 each
    # takes a stat): the one to apply (an event of an older one is stale). No pointer is read.
    found = {o.name: o.generation for o in listing if o.generation is not None}
    sizes = {o.name: o.size for o in listing}
    success_filename = inv.settings.success_filename
    batches: list[ManifestBatch] = []
    covered: list[CoveredBatch] = []
    budget = 0  # the head's max_bytes_per_job, set once the head is described
    taken = 0  # bytes of the batches taken so far
    dropped = set() if steps else backlog.dropped_by_operator(inv, table, covers[0].rel, covers[-1].rel)
    for ref in covers:
        # A derived table's step has no `_SUCCESS`: its pointer stands for it, at the step generation.
        generation = (
            lineage.STEP_GENERATION if steps else covering.live_generation(inv, table, ref.rel, found)
        )
        if generation is None or (ref.rel, generation) in dropped:  # deleted upstream, or dropped
            if not batches:
                backlog.drop(inv, table, ref)
                return None
            break
        folder = table.batch_folder(ref.rel)
        try:
            batch, resolved = covering.described(inv, table, table.success(ref.rel, success_filename))
            if (unread := unread_files(inv, folder, sizes, resolved.load)) is not None:
                raise ConfigError(unread)
        except (ConfigError, PathError) as exc:  # the next job starts at it, and stops on it
            if not batches:
                _fail(inv, table, held, lock_generation, backlog.covered(ref, generation), error=str(exc))
                return None
            break
        names = data_files(
            folder,
            sizes,
            nested=resolved.load.nested_folders,
            success_filename=success_filename,
            gate_filename=inv.settings.start_backfill_filename,
        )
        size = sum(sizes[name] for name in names)
        if batches and taken + size > budget:
            break  # the byte budget: the next job starts here
        uris = tuple(object_uri(inv.store, name) for name in names)
        data_sizes = tuple(sizes[name] for name in names)
        batches.append(
            manifest_batch(inv, batch, resolved, generation, data_uris=uris, data_sizes=data_sizes)
        )
        covered.append(backlog.covered(ref, generation))
        budget = budget or resolved.load.max_bytes_per_job
        taken += size
    job_id = covering.fresh_job_id(inv, table, covers[0], lock_generation)
    manifest = Manifest(
        job_id=job_id,
        bucket=inv.store.bucket,
        batches=tuple(batches),
        done_signal=table.done_signal(job_id),
        ordered=True,
    )
    write_manifest(inv, table.manifest(job_id), manifest)
    running = Lock(
        state=LockState.RUNNING,
        job_id=job_id,
        covers=tuple(covered),
        manifest=table.manifest(job_id),
        acquired_at=inv.clock.now(),
        backfill_generation=covering.authorizing_backfill(inv, table, held),
        history=held.history,
        position=held.position,  # kept while held: a job that applies nothing must not reset it
        attempt=held.attempt,  # a retry counts on from the failures before it
        last_error=held.last_error,
    )
    try:
        generation = lock.write(inv, table, running, lock_generation)
    except PreconditionFailed:
        return None  # another subscriber moved first; decide again from what it wrote
    log.info(
        "locked table for job",
        extra={
            "table": table.prefix,
            "job_id": job_id,
            "rels": [c.rel for c in covered],
            "lock_generation": generation,
        },
    )
    more_queued = len(covered) < listed  # its successor is submitted as soon as it commits
    return job_id if _submit(inv, table, running, generation, job_id, more_queued=more_queued) else None


def _still_running(inv: Invocation, job_id: str) -> bool:
    """The job just submitted has not ended (a runner may end one at once, leaving no done
    signal to wake anyone: the next turn must see that). No storage operation."""
    status = inv.runner.status(job_id)
    return status is not None and not status.state.finished


def _reprocess(inv: Invocation, table: Table, held: Lock, lock_generation: int, request: PointerRef) -> None:
    def fail(at: CoveredBatch, error: str) -> None:
        _fail(inv, table, held, lock_generation, at, error=error)

    taken = reprocess.acquire(inv, table, held, lock_generation, request, fail=fail)
    if taken is not None:
        running, generation = taken
        _submit(inv, table, running, generation, running.job_id or "")


def _coverable(
    inv: Invocation, table: Table, held: Lock, lock_generation: int, covers: tuple[PointerRef, ...]
) -> tuple[tuple[PointerRef, ...], bool]:
    """The pointers one job may cover: as many of `covers` as the head batch's config allows, and
    whether they are a derived table's steps. Empty when the head cannot even be described: the
    lock is then failed on it."""
    head = covers[0]
    try:
        batch, resolved = inv.batch(table.success(head.rel, inv.settings.success_filename))
        lineage.check_period(batch.uri, resolved.load, head.rel)
        lineage.check_sources(inv, table, resolved.load.lineage)
    except (ConfigError, PathError) as exc:
        generation = backlog.live_generation(inv, table, head.rel)
        if generation is None:  # deleted upstream: nothing to apply, nothing to block on
            backlog.drop(inv, table, head)
        else:
            _fail(inv, table, held, lock_generation, backlog.covered(head, generation), error=str(exc))
        return (), False
    limit = 1 if inv.settings.wait_for_validation else lineage.batches_per_job(resolved.load)
    return covers[:limit], resolved.load.derived is not None


def _fail(
    inv: Invocation,
    table: Table,
    held: Lock,
    lock_generation: int,
    at: CoveredBatch,
    *,
    error: str,
    job_id: str | None = None,
    **update: object,
) -> None:
    """Fail the lock at batch `at` (from `lock_generation`) and raise the alert (also on a batch that
    cannot even be described: a bad path or config)."""
    failed = lock.failed(table, held, job_id, at, error=error, now=inv.clock.now(), scheme=inv.store.scheme)
    lock.fail(inv, table, failed.model_copy(update=update) if update else failed, lock_generation)


def _block_late(inv: Invocation, table: Table, held: Lock, lock_generation: int, head: PointerRef) -> None:
    generation = backlog.live_generation(inv, table, head.rel)
    if generation is None:  # deleted upstream: nothing to apply
        backlog.drop(inv, table, head)
        return
    error = backlog.late_error(inv, table, held.position, head.rel, generation)
    _fail(inv, table, held, lock_generation, backlog.covered(head, generation), error=error)


def _submit(
    inv: Invocation, table: Table, held: Lock, lock_generation: int, job_id: str, *, more_queued: bool = False
) -> bool:
    """Submit the lock's job (`more_queued`: more backlog waits); True when the runner took it."""
    try:
        inv.runner.submit(job_id, object_uri(inv.store, held.manifest or ""), more_queued=more_queued)
    except JobServiceUnavailable as exc:
        error = f"the job could not be submitted: {exc}"
        if not retrying.defer_submit(inv, table, held, lock_generation, error=error):
            error = f"{error} (after {held.attempt + 1} attempts failing for transient reasons)"
            _fail(inv, table, held, lock_generation, held.covers[0], error=error, job_id=job_id)
        return False
    except JobError as exc:
        error = f"the job could not be submitted: {exc}"
        if isinstance(exc, JobDeferred) and retrying.schedule(
            inv, table, held, lock_generation, applied=(), error=error
        ):
            return False
        _fail(inv, table, held, lock_generation, held.covers[0], error=error, job_id=job_id)
        return False
    return True


def _finish(inv: Invocation, table: Table, held: Lock, lock_generation: int, finish: Finish) -> None:
    # Before the lock is released: a crash leaves this finish, rebuilds included, to the next run.
    rebuilds.queue(inv, table, held, finish.applied)
    rebuilds.track_unrecorded(inv, table, finish.applied, finish.failed if finish.unrecorded else None)
    backlog.remove_applied(inv, finish.applied)
    history = lock.with_job(held.history, held.job_id)
    # A late batch an operator let through sorts before the position: it must not move it back.
    # A reprocessed batch was committed before: the position stays where it is.
    moved = (c.rel for c in finish.applied if not c.reprocess)
    position = backlog.furthest(inv, table, held.position, *moved)
    error = finish.error or "job failed"
    if finish.failed is not None and finish.transient:
        attempt = 0 if finish.applied else held.attempt  # a new head counts its own failures
        retried = held.model_copy(update={"covers": (finish.failed,), "attempt": attempt})
        if retrying.schedule(inv, table, retried, lock_generation, applied=finish.applied, error=error):
            return
        error = f"{error} (after {retried.attempt + 1} attempts failing for transient reasons)"
    if finish.failed is not None and held.cancel is not CancelChoice.REQUEUE:
        _fail(
            inv,
            table,
            held,
            lock_generation,
            finish.failed,
            error=error,
            job_id=held.job_id,
            history=history,
            position=position,
        )
        return
    if finish.failed is not None:  # cancelled by an operator, its batch requeued: the next job takes it
        log.warning(
            f"job {held.job_id} was cancelled; batch {finish.failed.rel!r} stays first in the backlog",
            extra={"event": "job_cancelled", "table": table.prefix, "job_id": held.job_id},
        )
    if finish.failed is None and reprocess.release_unordered(inv, table, held, lock_generation):
        return
    released = Lock(
        state=LockState.FREE,
        history=history,
        # WAIT_FOR_VALIDATION: a _BACKFILL written before the job ended (the sweeper waking the
        # subscriber) is used up here; only one written after it is a go-ahead.
        backfill_generation=covering.authorizing_backfill(inv, table, held),
        position=position,
    )
    try:
        lock.write(inv, table, released, lock_generation)
    except PreconditionFailed:
        return
    log.info(
        "job applied",
        extra={"table": table.prefix, "job_id": held.job_id, "rels": [c.rel for c in finish.applied]},
    )


def _exit_if_empty(inv: Invocation, table: Table, state: TableState) -> None:
    """Remove `_BACKFILL`, then look at the backlog once more (the publisher writes its pointer
    before it looks at `_BACKFILL`, so one of the two always sees the other)."""
    current = state.backfill
    if current is not None:
        try:
            inv.store.delete(table.backfill, if_generation=current.generation)
        except PreconditionFailed:
            return  # a newer _BACKFILL arrived: its own run takes over
    if backlog.head(inv, table, 1) or reprocess.pending(inv, table):
        ensure_subscriber(inv, table)
