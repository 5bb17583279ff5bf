"""What a human does to a table: unlock a FAILED lock, restart a subscriber.

Both are compare-and-swap on the lock generation that was shown to the operator, so a lock that
changed since it was read is never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.core import logs
from turnstile.core.errors import PreconditionFailed, Terminal, TurnstileError
from turnstile.names.paths import Table
from turnstile.names.publishing import override_name
from turnstile.protocol import lineage, results, unordered
from turnstile.protocol import lock as table_lock
from turnstile.protocol.context import Invocation
from turnstile.state.records import (
    BatchOutcome,
    BatchResult,
    CancelChoice,
    CoveredBatch,
    Lock,
    LockState,
    Pause,
    Pointer,
    wake_body,
)
from turnstile.store.port import object_uri

log = logs.get("operator")


class UnlockRefused(TurnstileError, Terminal):
    """The lock is not in a state a human may release, or changed since it was read."""


@dataclass(frozen=True)
class Unlocked:
    failed_rel: str | None
    job_id: str | None
    dropped_pointer: str | None
    removed_by_hand: bool = False  # the failed batch's pointer was gone already: dropped too


def unlock(
    inv: Invocation,
    table: Table,
    *,
    skip_head: bool,
    expected_generation: int | None = None,
    publishing: bool = False,
) -> Unlocked:
    """Release a FAILED lock; with `skip_head`, drop the failed batch's pointer first (it was applied
    or repaired by hand). Then restart the subscriber. Unless `publishing` (`turnstile publish`'s own
    release), a publish of the failed batch that died before its release is withdrawn first: this
    unlock decides, and the batch is audited again (or dropped)."""
    lock, generation = table_lock.read(inv, table)
    if expected_generation is not None and generation != expected_generation:
        raise UnlockRefused(
            f"{table.uri}: the lock changed since it was read (generation {expected_generation} -> "
            f"{generation}); run status again and retry"
        )
    if lock.state is not LockState.FAILED:
        raise UnlockRefused(
            f"{table.uri}: the lock is {lock.state.value}, not FAILED; only a failed table is "
            "unlocked by hand"
        )
    dropped = None
    head = lock.covers[0] if lock.covers else None
    read_at = generation
    if (
        head is not None
        and not head.reprocess
        and not publishing
        and _publish_unreleased(inv, table, lock, head)
    ):
        generation = _withdraw_publish(inv, table, lock, generation, head)
    # Its pointer removed by hand (the original's way to skip a batch applied by hand): dropped.
    by_hand = head is not None and not head.reprocess and inv.store.stat(head.pointer) is None
    if by_hand and head:
        skip_head, dropped = True, head.pointer
    elif skip_head and head:
        # The lock first: a `turnstile publish` that released the table since it was read makes this
        # drop refused before it removes anything, and one still running then fails its release.
        generation = generation if generation != read_at else _fence(inv, table, lock, generation)
        dropped = _drop_pointer(inv, head)
    if dropped and head and not head.reprocess:
        why = f"{results.DROPPED} (unlock --skip-head), not applied: {lock.error}"
        record_dropped(inv, table, head.rel, head.success_generation, job_id=lock.job_id, error=why)
    position = lock.position
    success = inv.settings.success_filename
    moves = head is not None and not head.reprocess  # a reprocess request does not move the position
    if dropped and head and moves and (position is None or head.pointer > table.pointer(position, success)):
        position = head.rel  # skipped: the batches before it must not be pulled in again
    released = Lock(
        state=LockState.FREE,
        history=lock.history,
        position=position,
        backfill_generation=lock.backfill_generation,
        allow_late=None if skip_head or head is None else head.pointer,  # "apply it anyway"
    )
    try:
        table_lock.write(inv, table, released, generation)
    except PreconditionFailed as exc:
        raise UnlockRefused(
            f"{table.uri}: the lock changed while unlocking; run status again and retry"
        ) from exc
    resume(inv, table)
    if dropped and head and not head.reprocess:  # its period is declared: the watermark passes it
        lineage.after_declared(inv, table, (head.rel,))
    log.warning(
        "table unlocked by an operator",
        extra={
            "event": "table_unlocked",
            "table": table.prefix,
            "rel": lock.failed_rel,
            "job_id": lock.job_id,
            "skip_head": skip_head,
        },
    )
    return Unlocked(lock.failed_rel, lock.job_id, dropped, removed_by_hand=by_hand)


_DROP_TRIES = 5


def _drop_pointer(inv: Invocation, head: CoveredBatch) -> str | None:
    """Delete the failed batch's pointer; its name, or None when it is gone or now queues a newer
    upload of the batch, which must still apply. A pointer published again for the same upload (a
    duplicate event of its `_SUCCESS`) has a new generation but is the same batch: dropped too."""
    generation = head.pointer_generation
    for _ in range(_DROP_TRIES):
        try:
            inv.store.delete(head.pointer, if_generation=generation)
            return head.pointer
        except PreconditionFailed:
            found = inv.store.read(head.pointer)
            if found is None:
                return None
            if Pointer.decode(found.data, found.name).success_generation != head.success_generation:
                return None
            generation = found.generation
    raise UnlockRefused(
        f"{object_uri(inv.store, head.pointer)} kept changing while it was dropped; run status again, "
        "then retry"
    )


def record_dropped(
    inv: Invocation, table: Table, rel: str, success_generation: int, *, job_id: str | None, error: str
) -> bool:
    """The FAILED result record of a dropped batch, saying so (`results.DROPPED`), so that `history`
    shows the drop and nothing queues it again (`backfill`, the lock's recovery, the reconciliation,
    a late copy of its `_SUCCESS` event). A batch whose job failed keeps its record's counts; its
    error now begins with the drop. A committed record is left as it is: False (the batch was
    applied meanwhile). Its `_SUCCESS` uploaded again applies it."""
    name = table.result(rel, success_generation)
    found = inv.store.read(name)
    if found is not None:
        own = BatchResult.decode(found.data, found.name)
        if own.outcome is BatchOutcome.FAILED:
            try:
                inv.store.replace(
                    name, own.model_copy(update={"error": error}).encode(), if_generation=found.generation
                )
            except PreconditionFailed:
                return record_dropped(inv, table, rel, success_generation, job_id=job_id, error=error)
            return True
        return False
    record = BatchResult(
        job_id=job_id or "",
        rel=rel,
        success_generation=success_generation,
        outcome=BatchOutcome.FAILED,
        rows_read=0,
        rows_written=0,
        bad_rows=0,
        seconds=0.0,
        finished_at=inv.clock.now(),
        error=error,
    )
    try:
        inv.store.create(name, record.encode())
    except PreconditionFailed:  # its job's record came meanwhile
        return record_dropped(inv, table, rel, success_generation, job_id=job_id, error=error)
    return True


def resume(inv: Invocation, table: Table) -> int:
    """Undo `pause`, then start a subscriber run now: a new `_BACKFILL` generation (also the
    WAIT_FOR_VALIDATION go-ahead)."""
    inv.store.remove(table.pause)
    return inv.store.write(table.backfill, wake_body())


def pause(inv: Invocation, table: Table, reason: str | None = None) -> None:
    """Start no job for the table until `resume`: a job already running finishes, new batches keep
    queuing, the sweeper leaves the table alone."""
    inv.store.write(table.pause, Pause(reason=reason, at=inv.clock.now()).encode())
    log.warning(
        "table paused by an operator",
        extra={"event": "table_paused", "table": table.prefix, "reason": reason},
    )


class CancelRefused(TurnstileError, Terminal):
    """There is no running job to cancel, or the lock changed meanwhile."""


def cancel(inv: Invocation, table: Table, choice: CancelChoice) -> tuple[str, ...]:
    """Cancel the job that holds the table. Each batch is its own Iceberg commit, so what it
    committed stays committed and nothing is half applied; the batch it had not committed blocks
    the table (BLOCK, until `unlock`) or stays first in the backlog (REQUEUE). An unordered table
    has no lock: its open jobs are cancelled (`unordered.cancel`). Returns the job ids."""
    held, generation = table_lock.read(inv, table)
    if held.state is not LockState.RUNNING or not held.job_id:
        cancelled = unordered.cancel(inv, table, choice) if held.state is LockState.FREE else ()
        if not cancelled:
            raise CancelRefused(
                f"{table.uri}: no job holds the table (the lock is {held.state.value}) and no unordered "
                "job of it is running"
            )
        log.warning(
            f"unordered jobs {', '.join(cancelled)} of {table.uri} cancelled by an operator ({choice.value})",
            extra={"event": "job_cancel_requested", "table": table.prefix, "job_id": cancelled[0]},
        )
        return cancelled
    try:
        table_lock.write(inv, table, held.model_copy(update={"cancel": choice}), generation)
    except PreconditionFailed as exc:
        raise CancelRefused(f"{table.uri}: the lock changed meanwhile; run status again and retry") from exc
    inv.runner.cancel(held.job_id)
    # A job the service never took ends with no event of its own (and a paused table is not swept):
    # a run now sees the choice and blocks or requeues its batch.
    inv.store.write(table.backfill, wake_body())
    log.warning(
        f"job {held.job_id} of {table.uri} cancelled by an operator ({choice.value})",
        extra={"event": "job_cancel_requested", "table": table.prefix, "job_id": held.job_id},
    )
    return (held.job_id,)


def _withdraw_publish(inv: Invocation, table: Table, lock: Lock, generation: int, head: CoveredBatch) -> int:
    """Remove the failed batch's publish record, if any, once the lock has moved on from the
    generation read (the same lock written again): a `turnstile publish` still running, which read
    that generation, then fails its release instead of releasing the batch unaudited while this
    unlock, which decides, removes its record. Returns the lock's generation."""
    name = override_name(table.prefix, head.rel, head.success_generation)
    if inv.store.stat(name) is None:
        return generation
    generation = _fence(inv, table, lock, generation)
    inv.store.remove(name)
    return generation


def _fence(inv: Invocation, table: Table, lock: Lock, generation: int) -> int:
    """Write the lock read again, unchanged, from its generation: whoever read that generation (a
    `turnstile publish`, another unlock) now fails its own compare-and-swap. Its new generation;
    UnlockRefused, with nothing changed, when it moved since it was read."""
    try:
        return table_lock.write(inv, table, lock, generation)
    except PreconditionFailed as exc:
        raise UnlockRefused(
            f"{table.uri}: the lock changed while unlocking; run status again and retry"
        ) from exc


def _publish_unreleased(inv: Invocation, table: Table, lock: Lock, head: CoveredBatch) -> bool:
    """The lock is still FAILED by the job whose audits failed the batch (or that cannot be told): a
    `turnstile publish` of it never released it. A publish that did has the batch's next job hold
    the lock (which may have published it, then died before its result record): its record stays,
    for that batch's PUBLISHED_OVERRIDE."""
    found = inv.store.read(table.result(head.rel, head.success_generation))
    if found is None:
        return True
    try:
        result = BatchResult.decode(found.data, object_uri(inv.store, found.name))
    except TurnstileError:
        return True
    return result.job_id == lock.job_id
