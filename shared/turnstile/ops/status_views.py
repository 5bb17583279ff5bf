"""What `turnstile status` shows of a table's lock and of its failed unordered batches, and the
`turnstile unlock` command it prints for a blocked table."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from turnstile.names.paths import Table
from turnstile.protocol.state import TableState
from turnstile.state.records import BatchFailure, Lock, LockState


@dataclass(frozen=True)
class UnlockOption:
    option: str
    does: str


# What `turnstile unlock` can add to the command `status` prints for a BLOCKED table.
UNLOCK_OPTIONS = (
    UnlockOption(
        "--skip-head",
        "drop the failed batch's pointer instead of applying it again (it was applied or repaired by hand)",
    ),
)


def publish_command(table: Table, generation: int, scheme: str = "gs") -> str:
    """`turnstile publish gs://BUCKET/DS/TABLE --expect-generation N`: the staged batch a failed
    audit blocks the table on, published as it is; refused when the lock changed since."""
    return f"turnstile publish {scheme}://{table.bucket}/{table.prefix} --expect-generation {generation}"


def unlock_command(table: Table, generation: int, scheme: str = "gs") -> str:
    """`turnstile unlock gs://BUCKET/DS/TABLE --expect-generation N`, runnable as it is; its options
    are UNLOCK_OPTIONS. The generation shown makes it refuse a lock that changed since."""
    return f"turnstile unlock {scheme}://{table.bucket}/{table.prefix} --expect-generation {generation}"


@dataclass(frozen=True)
class LockView:
    state: str
    generation: int  # 0: no lock object yet; pass it to `unlock --expect-generation`
    job_id: str | None
    updated_at: datetime | None
    age_seconds: float | None
    covers: tuple[str, ...]
    failed_rel: str | None
    error: str | None
    unlock_command: str | None  # a FAILED lock's: runnable as printed, options apart
    unlock_options: tuple[UnlockOption, ...]
    position: str | None
    attempt: int = 0  # transient failures of the head batch so far
    retry_at: datetime | None = None  # when the head's job is tried again after one
    last_error: str | None = None  # the transient failure being retried
    publish_command: str | None = None  # FAILED on a batch its audits failed: accept it as staged


@dataclass(frozen=True)
class FailedView:
    rel: str
    success_generation: int
    job_id: str
    error: str
    transient: bool
    attempt: int
    retry_at: datetime | None  # None: waits for `turnstile retry`
    failed_at: datetime
    retry_command: str


def lock_view(
    state: TableState, lock: Lock | None, lock_generation: int, *, audit_failed: bool = False
) -> LockView | None:
    """`audit_failed`: the lock is FAILED on a batch its audits failed (`ops.publish.offered`)."""
    if lock is None:
        return None
    table = state.table
    failed = lock.state is LockState.FAILED
    scheme = state.inv.store.scheme
    return LockView(
        state=lock.state.value,
        generation=lock_generation,
        job_id=lock.job_id,
        updated_at=lock.updated_at,
        age_seconds=state.age(lock.updated_at),
        covers=tuple(c.rel for c in lock.covers),
        failed_rel=lock.failed_rel,
        error=lock.error,
        unlock_command=unlock_command(table, lock_generation, scheme) if failed else None,
        unlock_options=UNLOCK_OPTIONS if failed else (),
        position=lock.position,
        attempt=lock.attempt,
        retry_at=lock.retry_at,
        last_error=lock.last_error,
        publish_command=publish_command(table, lock_generation, scheme) if failed and audit_failed else None,
    )


def failed_view(where: str, failure: BatchFailure) -> FailedView:
    return FailedView(
        rel=failure.rel,
        success_generation=failure.success_generation,
        job_id=failure.job_id,
        error=failure.error,
        transient=failure.transient,
        attempt=failure.attempt,
        retry_at=failure.retry_at,
        failed_at=failure.failed_at,
        retry_command=f"turnstile retry {where}/{failure.rel}",
    )
