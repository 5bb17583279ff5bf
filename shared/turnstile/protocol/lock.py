"""The table lock, `<table>/_bqlock`: read it, change it by compare-and-swap, fail it with a record
a human can act on.

Every change is conditional on the generation last read (0: it must still be absent), and the lock
is never deleted: a released lock is rewritten FREE. The generation a job was locked from is its
fencing token: the job id derives from it (`jobids.ordered_job_id`), so a job from an older holding
can never be mistaken for the current one.
"""

from __future__ import annotations

from datetime import datetime

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names.paths import Table
from turnstile.protocol.context import Invocation
from turnstile.state.records import CoveredBatch, Lock, LockState, new_nonce
from turnstile.store.port import object_uri

log = logs.get("lock")
HISTORY = 5  # job ids kept in the lock, newest last


def unlock_command(table: Table, scheme: str = "gs") -> str:
    """How to release this table's FAILED lock, with its option, as the lock records it."""
    return f"turnstile unlock {scheme}://{table.bucket}/{table.prefix} [--skip-head]"


def read(inv: Invocation, table: Table) -> tuple[Lock, int]:
    """The lock and its generation; an absent lock is FREE at generation 0."""
    found = inv.store.read(table.lock)
    if found is None:
        return Lock(), 0
    where = object_uri(inv.store, table.lock)
    try:
        return Lock.decode(found.data, where), found.generation
    except ConfigError as exc:
        raise ConfigError(f"{exc}. {unreadable_lock_fix(table, where)}") from exc


def unreadable_lock_fix(table: Table, where: str) -> str:
    """What to do about a lock that holds something else: nothing moves for its table until then."""
    return (
        "Nothing moves for this table until it is fixed: if the bucket keeps object versions, restore "
        f"the last good one (gcloud storage ls --all-versions {where}, then gcloud storage cp "
        f"'{where}#GENERATION' {where}); otherwise, and only when no job runs for the table, delete it "
        "(the table restarts FREE and forgets its last applied position, so late batches are no longer "
        f"caught); then run: turnstile resume {table.uri}"
    )


def write(inv: Invocation, table: Table, lock: Lock, generation: int) -> int:
    """Compare-and-swap the lock from the generation read (0: it must still be absent)."""
    # A new nonce on every write: S3 compares by ETag (a hash of the bytes), so no two writes may
    # carry the same bytes.
    data = lock.model_copy(update={"updated_at": inv.clock.now(), "nonce": new_nonce()}).encode()
    if generation == 0:
        return inv.store.create(table.lock, data)
    return inv.store.replace(table.lock, data, if_generation=generation)


def fence(inv: Invocation, table: Table, lock: Lock, generation: int) -> int:
    """Rewrite the lock as it is (a new nonce, its `updated_at` kept), so that a compare-and-swap
    from any generation before this one fails: whoever read the lock, then the backlog, must read
    both again (`turnstile skip` after removing a pointer)."""
    data = lock.model_copy(update={"nonce": new_nonce()}).encode()
    if generation == 0:
        return inv.store.create(table.lock, data)
    return inv.store.replace(table.lock, data, if_generation=generation)


def with_job(history: tuple[str, ...], job_id: str | None) -> tuple[str, ...]:
    return (*history, job_id or "")[-HISTORY:]


def failed(
    table: Table,
    lock: Lock,
    job_id: str | None,
    at: CoveredBatch,
    *,
    error: str,
    now: datetime,
    scheme: str = "gs",
) -> Lock:
    """The FAILED lock naming the batch `at`: what stopped the table and how to release it."""
    return Lock(
        state=LockState.FAILED,
        job_id=job_id,
        covers=(at,),
        manifest=lock.manifest,
        acquired_at=lock.acquired_at or now,
        error=error,
        failed_rel=at.rel,
        unlock_command=unlock_command(table, scheme),
        history=lock.history,
        backfill_generation=lock.backfill_generation,
        position=lock.position,
    )


def fail(inv: Invocation, table: Table, failed_lock: Lock, generation: int) -> bool:
    """Write the FAILED lock from `generation` and raise the alert; False when another writer moved
    the lock first (the caller decides again)."""
    try:
        write(inv, table, failed_lock, generation)
    except PreconditionFailed:
        return False
    log_failure(table, failed_lock)
    return True


def log_failure(table: Table, lock: Lock) -> None:
    """The `table_blocked` ERROR line the alert policy matches."""
    log.error(
        f"batch {lock.failed_rel!r} of {table.uri} failed; the table is blocked. Fix the cause, then run: "
        f"{lock.unlock_command}",
        extra={
            "event": "table_blocked",
            "table": table.prefix,
            "bucket": table.bucket,
            "job_id": lock.job_id,
            "rel": lock.failed_rel,
            "error": lock.error,
            "unlock_command": lock.unlock_command,
        },
    )


def log_still_blocked(inv: Invocation, table: Table, lock: Lock) -> None:
    age = (inv.clock.now() - lock.updated_at).total_seconds() if lock.updated_at else None
    log.warning(
        f"{table.uri} is blocked at batch {lock.failed_rel!r}; nothing more is applied until: "
        f"{lock.unlock_command}",
        extra={
            "event": "table_still_blocked",
            "table": table.prefix,
            "job_id": lock.job_id,
            "rel": lock.failed_rel,
            "lock_age_seconds": age,
        },
    )
