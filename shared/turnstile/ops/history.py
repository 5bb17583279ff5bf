"""`turnstile history`: the result records of a table, in the order its batches are applied.

The job writes one record per batch attempt at `<table>/_turnstile/results/<rel>/<generation>.json`,
and one per operator's reprocess of it at `<generation>.reprocess-<request id>.json`.
One listing gives every name; records are sorted as the backlog sorts pointers (by the name
`<rel>/_SUCCESS`, then by `_SUCCESS` generation), and only the last `last` of them are read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from turnstile.errors import ConfigError
from turnstile.paths import Table
from turnstile.protocol import results
from turnstile.records import BatchOutcome, BatchResult
from turnstile.store.port import ListedObject, ObjectStore, object_uri


@dataclass(frozen=True)
class Entry:
    rel: str
    generation: int  # of the batch's `_SUCCESS`
    outcome: str  # COMMITTED | SKIPPED | REPROCESSED | FAILED | UNREADABLE
    rows_read: int
    rows_written: int
    bad_rows: int
    seconds: float
    snapshot_id: int | None
    finished_at: datetime | None
    job_id: str | None
    error: str | None
    object: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class History:
    table: str
    total: int  # records found; `entries` holds the last ones
    entries: tuple[Entry, ...]


def history(store: ObjectStore, table: Table, *, success_filename: str, last: int | None) -> History:
    named: list[tuple[str, str, int, str]] = []  # (object, rel, generation, reprocess request id)
    for info in store.list_entries(f"{table.internal}results/"):
        if (record := results.read_name(table, info.name)) is not None:
            named.append((info.name, record.rel, record.generation, record.request))
    # A reprocess follows the commit it repeats (request ids sort by the time they were made).
    named.sort(key=lambda item: (table.pointer(item[1], success_filename), item[2], item[3]))
    chosen = named[-last:] if last else named
    entries = []
    for name, rel, generation, _ in chosen:
        found = store.read(name)
        if found is None:
            continue  # deleted since listed
        entries.append(_entry(object_uri(store, name), rel, generation, found.data))
    return History(f"{table.dataset}.{table.table}", len(named), tuple(entries))


def _entry(where: str, rel: str, generation: int, data: bytes) -> Entry:
    try:
        record = BatchResult.decode(data, where)
    except ConfigError as exc:
        return Entry(rel, generation, "UNREADABLE", 0, 0, 0, 0.0, None, None, None, str(exc), where)
    return Entry(
        rel=record.rel,
        generation=record.success_generation,
        outcome=record.outcome.value,
        rows_read=record.rows_read,
        rows_written=record.rows_written,
        bad_rows=record.bad_rows,
        seconds=record.seconds,
        snapshot_id=record.snapshot_id,
        finished_at=record.finished_at,
        job_id=record.job_id,
        error=record.error,
        object=where,
    )


@dataclass(frozen=True)
class ResultView:
    rel: str
    success_generation: int
    outcome: str
    rows_written: int
    bad_rows: int
    finished_at: datetime | None
    job_id: str
    object: str


def last_result(store: ObjectStore, table: Table) -> tuple[ResultView | None, str | None]:
    """The result record written last (a reprocess's included): the one whose object was updated
    last in one listing of `results/`, then one read; not the batch last in rel order, which a
    late batch let through, a retried unordered batch or a reprocess would not be. Returns
    (record, error)."""
    newest: ListedObject | None = None
    for info in store.list_entries(f"{table.internal}results/"):
        if results.read_name(table, info.name) is None:
            continue
        if newest is None or (info.updated, info.name) > (newest.updated, newest.name):
            newest = info
    if newest is None:
        return None, None
    found = store.read(newest.name)
    if found is None:
        return None, None
    where = object_uri(store, newest.name)
    try:
        record = BatchResult.decode(found.data, where)
    except ConfigError as exc:
        return None, str(exc)
    dropped = record.outcome is BatchOutcome.FAILED and (record.error or "").startswith(results.DROPPED)
    return (
        ResultView(
            rel=record.rel,
            success_generation=record.success_generation,
            outcome=results.DROPPED_OUTCOME if dropped else record.outcome.value,
            rows_written=record.rows_written,
            bad_rows=record.bad_rows,
            finished_at=record.finished_at,
            job_id=record.job_id,
            object=where,
        ),
        None,
    )
