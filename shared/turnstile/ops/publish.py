"""`turnstile publish`: accept, as it is, the staged batch of a table blocked by a failed audit.

`plan` reads the lock and the failed batch's result record once and refuses, changing nothing,
unless the lock is FAILED on a batch whose audits found offending rows (`error_kind` `audit`);
`apply` records who publishes it and why (`PublishOverride`, which the batch's next job reads: it
publishes the staged commit without running the audits, as PUBLISHED_OVERRIDE), then releases the
lock at exactly the generation the plan read, as `turnstile unlock` does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from turnstile.core.errors import PreconditionFailed, TurnstileError
from turnstile.names.paths import Table
from turnstile.names.publishing import override_name
from turnstile.ops.errors import Refused
from turnstile.protocol import operator
from turnstile.protocol.context import Invocation
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import (
    AUDIT_FAILURE,
    BatchOutcome,
    BatchResult,
    CoveredBatch,
    Lock,
    LockState,
    PublishOverride,
)
from turnstile.store.port import object_uri


@dataclass(frozen=True)
class PublishPlan:
    """A lock FAILED on a batch whose audits failed, and who publishes it, why."""

    table: Table
    where: str  # gs:// or s3:// URI of the table
    lock: Lock
    generation: int  # the lock's: refused unless it is still at this one
    batch: CoveredBatch
    error: str  # the audit failure, as the batch's result record has it
    by: str
    reason: str | None

    def facts(self) -> list[tuple[str, object]]:
        return [
            ("table", self.where),
            ("lock generation", self.generation),
            ("failed batch", self.batch.rel),
            ("audit failure", self.error),
            ("published by", self.by),
            ("reason", self.reason),
        ]

    def effects(self) -> list[str]:
        rel = self.batch.rel
        return [
            f"publish records that {self.by} accepts batch {rel!r} as staged, then releases the lock",
            f"the next job publishes the staged commit of {rel!r} to main without running the audits; "
            "its history shows PUBLISHED_OVERRIDE with who and why",
        ]


@dataclass(frozen=True)
class PublishDone:
    plan: PublishPlan
    record: str  # URI of the PublishOverride

    def lines(self) -> list[str]:
        plan = self.plan
        return [
            f"recorded the publish of batch {plan.batch.rel!r} by {plan.by} ({self.record})",
            f"released the FAILED lock of {plan.where} (generation {plan.generation}); the next job "
            "publishes the staged commit without its audits; follow it with: turnstile status",
        ]

    def to_json(self) -> dict[str, object]:
        plan = self.plan
        return {
            "table": plan.where,
            "released": True,
            "lock_generation": plan.generation,
            "rel": plan.batch.rel,
            "success_generation": plan.batch.success_generation,
            "published_by": plan.by,
            "reason": plan.reason,
            "record": self.record,
            "audit_error": plan.error,
        }


def plan(
    inv: Invocation, table: Table, *, by: str, reason: str | None, expect_generation: int | None = None
) -> PublishPlan:
    """Read the lock and the failed batch's result; Refused (nothing changed) unless the lock is FAILED
    on a batch its audits failed and, when `expect_generation` is given, still at that generation."""
    where = object_uri(inv.store, table.prefix)
    lock, generation = read_lock(inv, table)
    if expect_generation is not None and generation != expect_generation:
        raise Refused(
            f"{where}: the lock is at generation {generation}, not {expect_generation}: it changed "
            "since it was read; run turnstile status again and retry"
        )
    if lock.state is not LockState.FAILED:
        raise Refused(
            f"{where}: the lock is {lock.state.value}, not FAILED: publish accepts the staged batch of a "
            f"table blocked by a failed audit only; see turnstile status {where}"
        )
    head = lock.covers[0] if lock.covers else None
    if head is None or head.reprocess:
        raise Refused(
            f"{where}: the FAILED lock holds no batch of the backlog to publish "
            f"({'a reprocess request' if head else 'none'}); fix the cause and run turnstile unlock {where}"
        )
    found = _result(inv, table, head)
    if found is None or found.outcome is not BatchOutcome.FAILED or found.error_kind != AUDIT_FAILURE:
        why = "has no result record" if found is None else f"failed for another reason: {found.error}"
        if found is not None and found.outcome is not BatchOutcome.FAILED:
            why = f"is {found.outcome.value}, not failed"
        raise Refused(
            f"{where}: batch {head.rel!r} {why}; publish accepts only a batch its audits failed: fix the "
            f"cause and run turnstile unlock {where}"
        )
    return PublishPlan(table, where, lock, generation, head, found.error or "", by, reason)


def apply(inv: Invocation, planned: PublishPlan) -> PublishDone:
    """Record the publish, then release the lock the plan read, at its generation (UnlockRefused,
    this run's record withdrawn, when it changed since). A lock that changed before the record is
    written is refused with nothing written: another run of `publish` may have released it, and
    its record, which the batch's job reads, must stay."""
    head = planned.batch
    name = override_name(planned.table.prefix, head.rel, head.success_generation)
    _, now = read_lock(inv, planned.table)
    if now != planned.generation:
        raise operator.UnlockRefused(
            f"{planned.table.uri}: the lock changed since it was read (generation {planned.generation} -> "
            f"{now}); run status again and retry"
        )
    record = PublishOverride(by=planned.by, reason=planned.reason, at=inv.clock.now())
    written = inv.store.write(name, record.encode())
    try:
        operator.unlock(
            inv, planned.table, skip_head=False, expected_generation=planned.generation, publishing=True
        )
    except BaseException:
        with contextlib.suppress(PreconditionFailed):  # ours only: a later run's record stays
            inv.store.delete(name, if_generation=written)  # a plain unlock must not publish it unaudited
        raise
    return PublishDone(planned, object_uri(inv.store, name))


def offered(inv: Invocation, table: Table, lock: Lock | None) -> bool:
    """The lock is FAILED on a batch of the backlog its audits failed: what `plan` accepts, so
    `status` offers `turnstile publish` (one read of the batch's result record)."""
    if lock is None or lock.state is not LockState.FAILED or not lock.covers or lock.covers[0].reprocess:
        return False
    found = _result(inv, table, lock.covers[0])
    return found is not None and found.outcome is BatchOutcome.FAILED and found.error_kind == AUDIT_FAILURE


def _result(inv: Invocation, table: Table, head: CoveredBatch) -> BatchResult | None:
    name = table.result(head.rel, head.success_generation)
    found = inv.store.read(name)
    if found is None:
        return None
    try:
        return BatchResult.decode(found.data, object_uri(inv.store, name))
    except TurnstileError:
        return None
