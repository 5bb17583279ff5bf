"""A `_bqlock` deleted by hand (the original loader's recovery: delete it, upload `_BACKFILL`) is
rebuilt from what the bucket still holds before the table is locked again.

The lock held two things the bucket has elsewhere: whether a job runs (its manifest in
`_turnstile/jobs/` without a done signal, and the job service's answer) and the position, the rel
of the last batch applied (the result records). A job that still runs keeps the table: locking it
again would let a second job commit the batches it is committing. The position keeps late batches
caught. Only a table with no lock object pays for this: a new one, or one whose lock was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.core import logs
from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import Table
from turnstile.protocol import backlog, lock, results
from turnstile.protocol.context import Invocation
from turnstile.protocol.jobids import is_unordered_job
from turnstile.state.records import Lock
from turnstile.store.port import ListedObject

log = logs.get("subscriber")
MANIFEST, DONE = ".manifest.json", ".done"
JOBS_ASKED = 5  # the newest jobs without a done signal asked about (older ones crashed long ago)


@dataclass(frozen=True)
class Rebuilt:
    running_job: str | None = None  # a job of the table the job service still runs: wait for it
    restored: bool = False  # a FREE lock at the last batch applied was written: decide again


def rebuild_lock(inv: Invocation, table: Table, *, restore: bool = True) -> Rebuilt:
    """For a table with no lock object, before it is locked: the job that still runs, or (with
    `restore`) the FREE lock at the position the result records give (nothing for a table that
    applied nothing). A reprocess restores no position: its table may be unordered, whose lock is
    removed after the reprocess."""
    running = _running_job(inv, table)
    if running is not None:
        log.warning(
            f"{table.uri} has no lock while its job {running} still runs (deleted by hand?): it is "
            "locked again once that job ends",
            extra={"event": "lock_missing", "table": table.prefix, "job_id": running},
        )
        return Rebuilt(running_job=running)
    position = last_applied(inv, table) if restore else None
    if position is None:
        return Rebuilt()
    try:
        lock.write(inv, table, Lock(position=position), 0)
    except PreconditionFailed:
        return Rebuilt(restored=True)  # another run wrote one: decide from it
    log.warning(
        f"{table.uri}: its lock was missing; rebuilt FREE at the last batch applied, {position!r}",
        extra={"event": "lock_rebuilt", "table": table.prefix, "rel": position},
    )
    return Rebuilt(restored=True)


def _running_job(inv: Invocation, table: Table) -> str | None:
    folder = f"{table.internal}jobs/"
    listed = inv.store.list_entries(folder)
    ended = {i.name.removesuffix(DONE) for i in listed if i.name.endswith(DONE)}
    open_: list[ListedObject] = [
        i for i in listed if i.name.endswith(MANIFEST) and i.name.removesuffix(MANIFEST) not in ended
    ]
    ids = (i.name[len(folder) :].removesuffix(MANIFEST) for i in sorted(open_, key=lambda i: i.updated))
    prefix = inv.settings.job_prefix
    locking = [job_id for job_id in ids if not is_unordered_job(prefix, table, job_id)]
    for job_id in reversed(locking[-JOBS_ASKED:]):
        status = inv.runner.status(job_id)
        if status is not None and not status.state.finished:
            return job_id
    return None


def last_applied(inv: Invocation, table: Table) -> str | None:
    """The rel of the last batch (in path order) whose result record says it was applied."""
    records: list[tuple[str, int, str]] = []  # (pointer, generation, rel): sorted as the backlog sorts
    for info in inv.store.list_entries(f"{table.internal}results/"):
        record = results.read_name(table, info.name)
        if record is not None and not record.request:  # a reprocess's record repeats a commit
            pointer = table.pointer(record.rel, inv.settings.success_filename)
            records.append((pointer, record.generation, record.rel))
    for _, generation, rel in sorted(records, reverse=True):
        if backlog.recorded_applied(inv, table, rel, generation):
            return rel
    return None
