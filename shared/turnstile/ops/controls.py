"""`turnstile pause`, `resume` and `cancel` on a table: the protocol's operator controls
(`protocol.operator`) with what each says it did, for the CLI and the console alike."""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.names.paths import Table
from turnstile.ops.status_views import unlock_command
from turnstile.protocol import lineage, operator
from turnstile.protocol.context import Invocation
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import CancelChoice, Lock, LockState
from turnstile.store.port import object_uri

PAUSE_DOES = (
    "Start no job for the table until resume: a running job finishes, new batches keep queuing in "
    "order, the sweeper leaves the table alone."
)
RESUME_DOES = (
    "Undo pause and start the table's subscriber now (a new _BACKFILL generation); also the go-ahead "
    "under WAIT_FOR_VALIDATION."
)
CANCEL_DOES = (
    "Cancel the job that holds the table (an unordered table: its running jobs). What it committed "
    "stays (each batch is its own commit); the batch it had not committed blocks the table (unordered: "
    "waits for turnstile retry), or with --requeue is applied by the next job."
)


@dataclass(frozen=True)
class Paused:
    where: str
    reason: str | None

    def lines(self) -> list[str]:
        return [f"paused {self.where}: no job starts until: turnstile resume {self.where}"]

    def to_json(self) -> dict[str, object]:
        return {"table": self.where, "paused": True, "reason": self.reason}


def pause(inv: Invocation, table: Table, reason: str | None = None) -> Paused:
    operator.pause(inv, table, reason)
    return Paused(object_uri(inv.store, table.prefix), reason)


@dataclass(frozen=True)
class Resumed:
    where: str
    generation: int  # the new _BACKFILL's
    lock: Lock
    lock_generation: int
    pause_lifted: bool
    subscriber: bool  # an ordered (or derived) table: its subscriber restarted
    unlock: str  # the unlock command of a BLOCKED table

    def lines(self) -> list[str]:
        said = [f"lifted the pause of {self.where}: jobs start again"] if self.pause_lifted else []
        if self.subscriber:
            said.append(f"restarted the subscriber of {self.where} (_BACKFILL generation {self.generation})")
        else:  # an unordered table: no subscriber, but the batches held while paused
            said.append(
                f"the batches held while paused are submitted now (_BACKFILL generation {self.generation})"
            )
        if self.lock.state is LockState.FAILED:
            said.append(
                f"the table is BLOCKED at batch {self.lock.failed_rel!r}: the subscriber stops at once; "
                f"fix the cause, then run: {self.unlock}"
            )
        return said

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.where,
            "backfill_generation": self.generation,
            "lock": self.lock.state.value,
            "pause_lifted": self.pause_lifted,
        }


def resume(inv: Invocation, table: Table) -> Resumed:
    lock, lock_generation = read_lock(inv, table)
    paused = inv.store.stat(table.pause) is not None
    generation = operator.resume(inv, table)
    # A derived table is ordered before its first lock.
    subscriber = bool(lock_generation) or lineage.is_derived(inv, table)
    return Resumed(
        object_uri(inv.store, table.prefix),
        generation,
        lock,
        lock_generation,
        paused,
        subscriber,
        unlock_command(table, lock_generation, inv.store.scheme),
    )


@dataclass(frozen=True)
class Cancelled:
    where: str
    job_ids: tuple[str, ...]
    choice: CancelChoice
    held_by_job: bool  # an ordered table's job held the lock (else: an unordered table's jobs)

    def lines(self) -> list[str]:
        said = [f"asked the job service to cancel {', '.join(self.job_ids)}"]
        requeue = self.choice is CancelChoice.REQUEUE
        if not self.held_by_job:  # an unordered table's jobs, one batch each
            then = (
                "is applied again by a new job" if requeue else f"waits for: turnstile retry {self.where}/REL"
            )
            follow = "follow it with: turnstile status"
            said.append(f"when each has stopped, its batch, if not committed, {then}; {follow}")
            return said
        then = (
            "stays first in the backlog"
            if requeue
            else f"blocks the table until: turnstile unlock {self.where}"
        )
        said.append(
            f"when it has stopped, the batch it had not committed {then}; follow it with: turnstile status"
        )
        return said

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.where,
            "job_id": self.job_ids[0],
            "job_ids": list(self.job_ids),
            "then": self.choice.value,
        }


def cancel(inv: Invocation, table: Table, choice: CancelChoice) -> Cancelled:
    """`operator.cancel` (CancelRefused when no job runs); the invocation's runner cancels the job."""
    held, _ = read_lock(inv, table)
    job_ids = operator.cancel(inv, table, choice)
    return Cancelled(object_uri(inv.store, table.prefix), job_ids, choice, held.state is LockState.RUNNING)
