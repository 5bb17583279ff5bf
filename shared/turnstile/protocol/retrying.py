"""The lock after a transient failure: FREE with the head batch's next attempt and its retry time
(the decision itself, transient or terminal and when, is `retries`, pure)."""

from __future__ import annotations

from turnstile.config.load_config import LoadConfig
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.paths import Table
from turnstile.protocol import backlog, lock, retries
from turnstile.protocol.context import Invocation
from turnstile.state.records import CoveredBatch, Lock, LockState

log = logs.get("subscriber")
DEFAULT_CONFIG = LoadConfig.model_validate({})


def schedule(
    inv: Invocation,
    table: Table,
    held: Lock,
    lock_generation: int,
    *,
    applied: tuple[CoveredBatch, ...],
    error: str,
) -> bool:
    """After a transient failure: free the lock with a retry time for the head batch, unless its
    retries are used up (False: the caller fails the lock)."""
    attempt = held.attempt + 1
    retries_left = held.covers[0].rel if held.covers else None
    config = head_config(inv, held)
    when = retries.retry_at(
        attempt, config.job_retries, config.job_retry_backoff_seconds, held.job_id or "", inv.clock.now()
    )
    if when is None:
        return False
    position = backlog.furthest(inv, table, held.position, *(c.rel for c in applied))
    waiting = Lock(
        state=LockState.FREE,
        history=lock.with_job(held.history, held.job_id),
        backfill_generation=held.backfill_generation,
        position=position,
        allow_late=held.allow_late,
        attempt=attempt,
        retry_at=when,
        last_error=error,
    )
    try:
        lock.write(inv, table, waiting, lock_generation)
    except PreconditionFailed:
        return True  # another subscriber moved first; it decides from what it wrote
    log.warning(
        f"job {held.job_id} of {table.uri} failed for a transient reason ({error}); batch "
        f"{retries_left!r} is retried at {when.isoformat()} (attempt {attempt} of {config.job_retries})",
        extra={
            "event": "job_retry_scheduled",
            "table": table.prefix,
            "job_id": held.job_id,
            "rel": retries_left,
            "attempt": attempt,
            "retry_at": when.isoformat(),
            "error": error,
        },
    )
    return True


def defer_submit(inv: Invocation, table: Table, held: Lock, lock_generation: int, *, error: str) -> bool:
    """The job service did not take the lock's job (quota, 5xx, no answer): keep the lock RUNNING
    on the same job id, whose submit is idempotent (a create that got through is attached to, never
    doubled), and submit it again at a retry time, unless the head batch's retries are used up
    (False: the caller fails the lock)."""
    attempt = held.attempt + 1
    config = head_config(inv, held)
    when = retries.retry_at(
        attempt, config.job_retries, config.job_retry_backoff_seconds, held.job_id or "", inv.clock.now()
    )
    if when is None:
        return False
    waiting = held.model_copy(update={"attempt": attempt, "retry_at": when, "last_error": error})
    try:
        lock.write(inv, table, waiting, lock_generation)
    except PreconditionFailed:
        return True  # another subscriber moved first; it decides from what it wrote
    rel = held.covers[0].rel if held.covers else None
    log.warning(
        f"job {held.job_id} of {table.uri} could not be submitted ({error}); submitted again at "
        f"{when.isoformat()} (attempt {attempt} of {config.job_retries})",
        extra={
            "event": "job_retry_scheduled",
            "table": table.prefix,
            "job_id": held.job_id,
            "rel": rel,
            "attempt": attempt,
            "retry_at": when.isoformat(),
            "error": error,
        },
    )
    return True


def head_config(inv: Invocation, held: Lock) -> LoadConfig:
    """The retry settings of the head batch's config cascade (defaults when it cannot be read)."""
    if not held.covers:
        return DEFAULT_CONFIG
    found = inv.store.read(held.covers[0].pointer)
    if found is None:
        return DEFAULT_CONFIG
    try:
        _, resolved = inv.batch(backlog.decode(inv, found).success)
    except (ConfigError, PathError):
        return DEFAULT_CONFIG
    return resolved.load


def void_unsubmitted(inv: Invocation, held: Lock) -> bool:
    """A job cancelled before the job service had it: its manifest goes first, so that a submit
    still on its way (an invocation that read the lock before the cancel, then stalled) starts a job
    with nothing to apply; True when the service still does not have the job, so that the lock may
    move on. The job ids of a lock are never used again."""
    if held.manifest:
        inv.store.remove(held.manifest)
    return inv.runner.status(held.job_id or "") is None
