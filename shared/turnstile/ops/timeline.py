"""The batches of one table over time: when each arrived, when its job took it, when it committed
(or failed, or was dropped), for the console's timeline.

From records already kept: a result record gives the job, its outcome and when it finished (the job
started on it `seconds` before); the batch's `_SUCCESS` (one listing of the range of folders shown,
`_SUCCESS` names only) gives when it arrived; a backlog pointer, when a queued batch was published;
the lock, the batches its job is applying now or failed on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from turnstile.names.paths import Table
from turnstile.ops.history import Entry
from turnstile.protocol import results
from turnstile.protocol.context import Invocation
from turnstile.state.records import Lock, LockState
from turnstile.store.port import ObjectInfo

QUEUED_SHOWN = 50


@dataclass(frozen=True)
class Span:
    rel: str
    generation: int | None  # of the batch's `_SUCCESS`, when known
    # COMMITTED | REPROCESSED | REBUILT | PUBLISHED_OVERRIDE | SKIPPED | FAILED | DROPPED | RUNNING | BLOCKED
    # | QUEUED
    state: str
    arrived: datetime | None  # its `_SUCCESS` written (a queued batch: its pointer published)
    started: datetime | None  # its job took it
    finished: datetime | None  # committed, failed or dropped
    job_id: str | None = None
    error: str | None = None
    rows: int | None = None


def spans(inv: Invocation, table: Table, entries: tuple[Entry, ...], lock: Lock | None) -> list[Span]:
    """The history entries given (a page of `ops.history`), then the batches the lock's job holds,
    then the first QUEUED_SHOWN queued ones, in the order they apply."""
    success = inv.settings.success_filename
    found = [_of_entry(e) for e in entries]
    held = {c.rel for c in lock.covers} if lock is not None and lock.state is not LockState.FREE else set()
    if lock is not None and held:
        failed = lock.state is LockState.FAILED
        for covered in lock.covers:
            if failed and covered.rel != lock.failed_rel:
                continue
            recorded = next(
                (
                    i
                    for i, s in enumerate(found)
                    if (s.rel, s.generation, s.state) == (covered.rel, covered.success_generation, "FAILED")
                ),
                None,
            )
            if failed and recorded is not None:  # the job's own record of the failure that blocks
                found[recorded] = replace(found[recorded], state="BLOCKED", error=lock.error)
                continue
            found.append(
                Span(
                    rel=covered.rel,
                    generation=covered.success_generation,
                    state="BLOCKED" if failed else "RUNNING",
                    arrived=None,
                    started=lock.acquired_at,
                    finished=lock.updated_at if failed else None,
                    job_id=lock.job_id,
                    error=lock.error if failed else None,
                )
            )
    for pointer in _queued(inv, table):
        rel = table.rel_of_pointer(pointer.name, success)
        if rel not in held:
            found.append(Span(rel, None, "QUEUED", pointer.updated, None, None))
    return _with_arrivals(inv, table, found)


def _of_entry(entry: Entry) -> Span:
    outcome = entry.outcome
    if outcome == "FAILED" and (entry.error or "").startswith(results.DROPPED):
        outcome = results.DROPPED_OUTCOME
    started = None
    if entry.finished_at is not None and outcome != results.DROPPED_OUTCOME:
        started = entry.finished_at - timedelta(seconds=entry.seconds)
    return Span(
        rel=entry.rel,
        generation=entry.generation,
        state=outcome,
        arrived=None,
        started=started,
        finished=entry.finished_at,
        job_id=entry.job_id,
        error=entry.error,
        rows=entry.rows_written,
    )


def _queued(inv: Invocation, table: Table) -> list[ObjectInfo]:
    success = inv.settings.success_filename
    return [
        info
        for info in inv.store.list_objects(table.backlog, limit=QUEUED_SHOWN * 2)
        if info.name.endswith(f"/{success}") or info.name == table.backlog + success
    ][:QUEUED_SHOWN]


def _with_arrivals(inv: Invocation, table: Table, found: list[Span]) -> list[Span]:
    """Each span's arrival, from one listing of the `_SUCCESS` objects from the first batch shown
    to the last (a queued batch keeps its pointer's time when its `_SUCCESS` is gone)."""
    if not found:
        return found
    success = inv.settings.success_filename
    names = sorted(table.success(s.rel, success) for s in found)
    listed = inv.store.list_objects(
        f"{table.prefix}/",
        start_offset=names[0],
        end_offset=names[-1] + "~",  # "~" sorts after every name character the marker's could have
        only=lambda name: name.endswith(f"/{success}"),
    )
    arrived = {info.name: info for info in listed}
    shown = []
    for span in found:
        info = arrived.get(table.success(span.rel, success))
        # A reprocess (a rebuild) is asked for long after its batch arrived: it has no wait to show.
        fits = info is not None and (span.generation is None or info.generation == span.generation)
        if info is not None and fits and span.state not in ("REPROCESSED", "REBUILT"):
            shown.append(replace(span, arrived=info.updated))
        else:
            shown.append(span)
    return shown
