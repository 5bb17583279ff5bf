"""`turnstile unlock`: what releasing a table's FAILED lock will do (shown before it is confirmed),
and doing it, for the CLI and the console alike.

`plan` reads the lock once and refuses, changing nothing, a lock that is not FAILED or that is no
longer at the generation the operator was shown; `apply` releases it at exactly the generation the
plan read (`protocol.operator.unlock`), so a lock that changed while the operator confirmed is
never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.paths import Table
from turnstile.ops.errors import Refused
from turnstile.protocol import lineage, operator
from turnstile.protocol.context import Invocation
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import Lock, LockState
from turnstile.store.port import object_uri

DOES = (
    "Release the FAILED lock (refused if it changed since it was shown), then restart the subscriber. "
    "Without --skip-head the failed batch is applied again; with it, its pointer is dropped."
)
# Running functions cache each _config/ level: unlocking sooner re-fails with the old config.
CONFIG_CACHE_NOTE = (
    "a _config/ change reaches running functions within CONFIG_CACHE_SECONDS (60 s by default) of "
    "its upload: after fixing a config, wait that long before unlocking"
)


@dataclass(frozen=True)
class UnlockPlan:
    """A FAILED lock as read, and what unlocking it does."""

    table: Table
    where: str  # gs:// or s3:// URI of the table
    lock: Lock
    generation: int  # the lock's: the unlock is refused unless it is still at this one
    skip_head: bool
    dependents: tuple[str, ...]  # tables that build the skipped batch's period without it

    @property
    def command(self) -> str:
        """The CLI command that does the same, runnable as it is."""
        skip = " --skip-head" if self.skip_head else ""
        return f"turnstile unlock {self.where} --expect-generation {self.generation}{skip} --yes"

    def facts(self) -> list[tuple[str, object]]:
        lock = self.lock
        return [
            ("table", self.where),
            ("state", lock.state.value),
            ("lock generation", self.generation),
            ("failed batch", lock.failed_rel),
            ("job", lock.job_id),
            ("failed at", lock.updated_at),
            ("error", lock.error),
            ("last applied", lock.position),
        ]

    def effects(self) -> list[str]:
        """What will happen, in the order the CLI says it before asking."""
        rel = self.lock.failed_rel
        if self.skip_head:
            said = [f"unlock --skip-head drops batch {rel!r} (its pointer) and releases the lock"]
        else:
            said = [f"unlock releases the lock; batch {rel!r} is applied again"]
        said.append(CONFIG_CACHE_NOTE)
        if self.dependents:
            said.append(
                f"tables that depend on it ({', '.join(self.dependents)}) will build the period of batch "
                f"{rel!r} without it; to hold them back, turnstile pause them first"
            )
        return said


@dataclass(frozen=True)
class UnlockDone:
    plan: UnlockPlan
    unlocked: operator.Unlocked

    @property
    def batch_retried(self) -> bool:
        return self.unlocked.dropped_pointer is None and bool(self.plan.lock.covers)

    def lines(self) -> list[str]:
        """What was done, as the CLI reports it."""
        plan, done = self.plan, self.unlocked
        said = [f"released the FAILED lock of {plan.where} (generation {plan.generation})"]
        if done.removed_by_hand:
            said.append(
                f"the pointer of batch {done.failed_rel!r} had been removed by hand: the batch is dropped, "
                "as with --skip-head (upload its _SUCCESS again to apply it)"
            )
        elif done.dropped_pointer:
            said.append(
                f"dropped the pointer of batch {done.failed_rel!r}: it counts as applied and is not retried"
            )
        elif plan.skip_head and plan.lock.covers:
            said.append(
                f"the pointer of batch {done.failed_rel!r} was already gone or re-published with a new "
                "generation, which will be applied"
            )
        elif plan.lock.covers:
            said.append(f"batch {done.failed_rel!r} will be applied again")
        said.append("restarted the subscriber (a new _BACKFILL generation); follow it with: turnstile status")
        return said

    def to_json(self) -> dict[str, object]:
        plan, done = self.plan, self.unlocked
        return {
            "table": plan.where,
            "released": True,
            "lock_generation": plan.generation,
            "failed_rel": done.failed_rel,
            "job_id": done.job_id,
            "skip_head": plan.skip_head,
            "dropped_pointer": done.dropped_pointer,
            "pointer_removed_by_hand": done.removed_by_hand,
            "batch_retried": self.batch_retried,
            "dependents": list(plan.dependents),
            "subscriber_restarted": True,
        }


def plan(
    inv: Invocation, table: Table, *, skip_head: bool, expect_generation: int | None = None
) -> UnlockPlan:
    """Read the lock; Refused (nothing changed) unless it is FAILED and, when `expect_generation`
    is given, still at that generation."""
    where = object_uri(inv.store, table.prefix)
    lock, generation = read_lock(inv, table)
    if expect_generation is not None and generation != expect_generation:
        raise Refused(
            f"{where}: the lock is at generation {generation}, not {expect_generation}: it changed "
            "since it was read; run turnstile status again and retry"
        )
    if lock.state is not LockState.FAILED:
        raise Refused(
            f"{where}: the lock is {lock.state.value}, not FAILED, so there is nothing to unlock; "
            f"see turnstile status {where}"
        )
    # Dependents count a skipped batch as passed: they build its period without it.
    waiting = lineage.dependents(inv, table) if skip_head and lock.covers else []
    return UnlockPlan(table, where, lock, generation, skip_head, tuple(waiting))


def apply(inv: Invocation, planned: UnlockPlan) -> UnlockDone:
    """Release the lock the plan read, at its generation (UnlockRefused when it changed since)."""
    done = operator.unlock(
        inv, planned.table, skip_head=planned.skip_head, expected_generation=planned.generation
    )
    return UnlockDone(planned, done)
