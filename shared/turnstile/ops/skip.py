"""`turnstile skip`: drop one batch of an ordered table that has not been applied, on the record.

Deleting a batch's backlog pointer by hand does not skip it: a `_SUCCESS` past the table's position
with no pointer and no result record is a batch whose event never came, and the subscriber's
listing or the reconciliation queues it again. `skip` writes the record `unlock --skip-head` writes
(FAILED, "dropped by an operator"), then deletes the pointer at the generation it read, so nothing
queues the batch again; uploading its `_SUCCESS` again applies it. Refused, changing nothing, for a
batch that is committed, that the running job covers, or that blocks the table (`unlock
--skip-head` drops that one), and for a batch of an unordered table (it has no backlog).
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.core import logs
from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import Table
from turnstile.ops.errors import Failed, Refused
from turnstile.protocol import backlog, lineage, lock, operator, results
from turnstile.protocol.context import Invocation
from turnstile.state.records import Lock, LockState
from turnstile.store.port import object_uri

log = logs.get("skip")
FENCE_TRIES = 5


@dataclass(frozen=True)
class Skipped:
    batch: str  # gs:// or s3:// URI of the batch folder
    table: str  # gs:// or s3:// URI of the table
    rel: str
    generation: int  # of the batch's `_SUCCESS`: the one recorded as dropped
    pointer: str | None  # URI of the pointer deleted; None when none was queued yet
    taken_by_job: str | None = None  # a job that locked the table meanwhile and covers it anyway

    def lines(self) -> list[str]:
        said = [f"{self.batch} (generation {self.generation}) is recorded as dropped by an operator"]
        said.append(f"deleted its pointer {self.pointer}" if self.pointer else "it had no pointer queued")
        if self.taken_by_job:
            said.append(f"but job {self.taken_by_job} locked the table meanwhile and applies it: see status")
        said.append(f"upload its _SUCCESS again to apply it; follow it with: turnstile history {self.table}")
        return said


DOES = (
    "Drop a batch of an ordered table that has not been applied (it was applied or repaired by hand): "
    "records it as dropped, as unlock --skip-head does, and deletes its backlog pointer."
)


def question(batch_uri: str) -> str:
    """What the CLI asks before a skip (`batch_uri`: the batch's `_SUCCESS`)."""
    return f"skip the batch of {batch_uri}: record it as dropped, not applied?"


def skip(inv: Invocation, success_name: str, reason: str | None = None) -> Skipped:
    """Record the batch whose `_SUCCESS` is `success_name` as dropped and delete its pointer."""
    batch, resolved = inv.batch(success_name)  # a path or config that does not resolve says why
    table, rel = batch.table, batch.rel
    where, folder = object_uri(inv.store, table.prefix), object_uri(inv.store, batch.folder)
    if not (resolved.ordered or inv.settings.order_per_table):
        raise Refused(
            f"{folder} belongs to unordered table {where}, which has no backlog to skip it from: each "
            f"batch runs as its own job; see turnstile status {where}"
        )
    live = backlog.live_generation(inv, table, rel)
    if live is None:
        raise Refused(f"{object_uri(inv.store, success_name)} does not exist: there is no batch to skip")
    if backlog.recorded_applied(inv, table, rel, live):
        raise Refused(
            f"{folder} (its _SUCCESS generation {live}) is already committed: there is nothing to skip "
            f"(turnstile history {where})"
        )
    held, _ = lock.read(inv, table)
    head = backlog.head(inv, table, 1) if held.retry_at is not None else []
    _refuse_held(held, rel, head[0].rel if head else None, folder, where)
    pointer = batch.pointer(inv.settings.success_filename)
    queued = inv.store.stat(pointer)
    why = f"{results.DROPPED} (turnstile skip), not applied" + (f": {reason}" if reason else "")
    # The record first: a pointer gone without it would be queued again as a lost event.
    if not operator.record_dropped(inv, table, rel, live, job_id=held.job_id, error=why):
        raise Refused(
            f"{folder} (its _SUCCESS generation {live}) was committed meanwhile (turnstile history {where})"
        )
    if queued is not None:
        try:
            inv.store.delete(pointer, if_generation=queued.generation)
        except PreconditionFailed as exc:
            raise Failed(
                f"{object_uri(inv.store, pointer)} changed while skipping (re-published or applied); "
                f"run turnstile status {where}, then skip again"
            ) from exc
    taken_by = _fence(inv, table, rel, where)
    if taken_by is None:  # dropped for good: its period is declared, the watermark passes it
        lineage.after_declared(inv, table, (rel,))
    log.warning(
        f"batch {rel!r} of {where} skipped by an operator: not applied",
        extra={"event": "batch_skipped", "table": table.prefix, "rel": rel, "reason": reason},
    )
    done = object_uri(inv.store, pointer) if queued is not None else None
    return Skipped(folder, where, rel, live, done, taken_by)


def _fence(inv: Invocation, table: Table, rel: str, where: str) -> str | None:
    """After the pointer is gone: the job that locked the table meanwhile covering the batch, if
    one did; else the lock is rewritten, so that a subscriber that listed the pointer before it went
    (and would lock from the generation it read then) is refused, and lists the backlog again."""
    for _ in range(FENCE_TRIES):
        held, generation = lock.read(inv, table)
        if held.state is LockState.RUNNING and rel in {c.rel for c in held.covers}:
            return held.job_id
        try:
            lock.fence(inv, table, held, generation)
            return None
        except PreconditionFailed:
            continue  # the lock moved: look again
    raise Failed(
        f"the lock of {where} kept changing while batch {rel!r} was skipped: it is recorded as dropped, "
        f"but a job may still apply it; run turnstile history {where} to see which"
    )


def _refuse_held(held: Lock, rel: str, retried: str | None, folder: str, where: str) -> None:
    """A batch the running job covers, the head whose transient failure waits for its retry
    (`retried`), or the failed batch that blocks the table, is not skipped."""
    if retried == rel:  # its job may have committed it before it failed: the retry finds out
        raise Refused(
            f"{folder} heads the backlog and its job failed for a transient reason; it is retried at "
            f"{held.retry_at:%Y-%m-%d %H:%M:%S} UTC and may already be committed: skip it after the "
            f"retry (turnstile status {where})"
        )
    if held.state is not LockState.FAILED and rel in {c.rel for c in held.covers}:
        raise Refused(
            f"{folder} is being applied by job {held.job_id}, which holds the table now; wait for it "
            f"(turnstile status {where}), or cancel it first (turnstile cancel {where}) and drop the "
            f"batch with turnstile unlock {where} --skip-head"
        )
    if held.state is LockState.FAILED and held.failed_rel == rel:
        raise Refused(
            f"{folder} is the failed batch that blocks the table; drop it with: turnstile unlock "
            f"{where} --skip-head"
        )
