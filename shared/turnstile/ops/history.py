"""`turnstile history`: the result records of a table, in the order its batches are applied.

The job writes one record per batch attempt at `<table>/_turnstile/results/<rel>/<generation>.json`,
and one per operator's reprocess of it at `<generation>.reprocess-<request id>.json`.
An unordered batch refused before any job ran (its files cannot be read as its config says, its
config does not validate), or whose job failed before writing its record, has only the failure record
the functions wrote at `<table>/_turnstile/failures/<rel>/<generation>.json`: it is listed as FAILED
from that record, as `status` lists it. A batch an operator dropped (`unlock --skip-head`, `skip`)
has a FAILED record whose error says so: DROPPED, as in `status`.

One listing of each folder gives every name; records are sorted as the backlog sorts pointers (by the
name `<rel>/_SUCCESS`, then by `_SUCCESS` generation), and only the last `last` of them are read,
READERS at a time.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from turnstile.core.errors import ConfigError
from turnstile.names.paths import Table
from turnstile.protocol import backlog, results
from turnstile.state.records import BatchFailure, BatchOutcome, BatchResult
from turnstile.store.port import ListedObject, ObjectStore, object_uri

READERS = 8  # records read at once


@dataclass(frozen=True)
class Entry:
    rel: str
    generation: int  # of the batch's `_SUCCESS`
    # COMMITTED | SKIPPED | REPROCESSED | REBUILT | PUBLISHED_OVERRIDE | FAILED | DROPPED | UNREADABLE
    outcome: str
    rows_read: int
    rows_written: int
    bad_rows: int
    seconds: float
    snapshot_id: int | None
    finished_at: datetime | None
    job_id: str | None
    error: str | None
    object: str
    # Per expectation of load.json: {"name", "on_fail", "failed_rows"} (rows whose check was not TRUE).
    expectations: tuple[dict[str, Any], ...] = ()
    published_by: str | None = None  # PUBLISHED_OVERRIDE: who ran `turnstile publish`, and why
    publish_reason: str | None = None
    # REBUILT: the source change the step was rebuilt for ({"table", "rel", "success_generation",
    # "reprocess", "at"}).
    cause: dict[str, Any] | None = None

    def note(self) -> str | None:
        """The error of a failed batch; who published a batch without its audits, and why; the
        source change a derived step was rebuilt for."""
        if self.cause is not None:
            how = f"reprocess {self.cause['reprocess']}" if self.cause.get("reprocess") else "commit"
            return (
                f"rebuilt after {self.cause['table']} {self.cause['rel']!r} changed (its {how} of "
                f"generation {self.cause['success_generation']})"
            )
        if self.published_by is None:
            return self.error
        why = f": {self.publish_reason}" if self.publish_reason else ""
        return f"published without its audits by {self.published_by}{why}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def expectations_text(self) -> str | None:
        """`positive_amount 2 dropped, has_id 1 warned` (expectations rows failed); `passed` when
        every expectation passed on every row; None for a batch with no expectations."""
        if not self.expectations:
            return None
        failed = [e for e in self.expectations if e["failed_rows"]]
        said = {"warn": "warned", "drop": "dropped", "fail": "failed"}
        return (
            ", ".join(
                f"{e['name']} {e['failed_rows']} {said.get(e['on_fail'], e['on_fail'])}" for e in failed
            )
            or "passed"
        )


@dataclass(frozen=True)
class History:
    table: str
    total: int  # records found; `entries` holds the last ones
    entries: tuple[Entry, ...]


def history(
    store: ObjectStore, table: Table, *, success_filename: str, last: int | None, offset: int = 0
) -> History:
    """The last `last` records (None: all) in application order; with `offset`, the `last` before
    the newest `offset` ones (a page further back)."""
    named: list[tuple[str, str, int, str]] = []  # (object, rel, generation, reprocess request id)
    for info in store.list_entries(f"{table.internal}results/"):
        if (record := results.read_name(table, info.name)) is not None:
            named.append((info.name, record.rel, record.generation, record.request))
    # A failure with a result record of its own is that record's (the job's, with its counts).
    recorded = {(rel, generation) for _, rel, generation, request in named if not request}
    for failed in store.list_entries(table.failures):
        failure = results.read_failure_name(table, failed.name)
        if failure is not None and (failure.rel, failure.generation) not in recorded:
            named.append((failed.name, failure.rel, failure.generation, ""))
    # A reprocess follows the commit it repeats (request ids sort by the time they were made).
    named.sort(key=lambda item: (table.pointer(item[1], success_filename), item[2], item[3]))
    end = max(len(named) - offset, 0)
    chosen = named[max(end - last, 0) : end] if last else named[:end]
    entries = []
    with ThreadPoolExecutor(READERS, thread_name_prefix="history") as pool:
        read = list(pool.map(lambda item: store.read(item[0]), chosen))
    for (name, rel, generation, _), found in zip(chosen, read, strict=True):
        if found is None:
            continue  # deleted since listed
        where = object_uri(store, name)
        if name.startswith(table.failures):
            entries.append(_failure_entry(where, rel, generation, found.data))
        else:
            entries.append(_entry(where, rel, generation, found.data))
    return History(f"{table.dataset}.{table.table}", len(named), tuple(entries))


def _outcome(record: BatchResult) -> str:
    """The record's outcome; DROPPED for the FAILED record of a batch an operator dropped."""
    return results.DROPPED_OUTCOME if backlog.dropped(record) else record.outcome.value


def _unreadable(where: str, rel: str, generation: int, error: str) -> Entry:
    return Entry(rel, generation, "UNREADABLE", 0, 0, 0, 0.0, None, None, None, error, where)


def _entry(where: str, rel: str, generation: int, data: bytes) -> Entry:
    try:
        record = BatchResult.decode(data, where)
    except ConfigError as exc:
        return _unreadable(where, rel, generation, str(exc))
    return Entry(
        rel=record.rel,
        generation=record.success_generation,
        outcome=_outcome(record),
        rows_read=record.rows_read,
        rows_written=record.rows_written,
        bad_rows=record.bad_rows,
        seconds=record.seconds,
        snapshot_id=record.snapshot_id,
        finished_at=record.finished_at,
        job_id=record.job_id,
        error=record.error,
        object=where,
        expectations=tuple(count.model_dump() for count in record.expectations),
        published_by=record.published_by,
        publish_reason=record.publish_reason,
        cause=None if record.cause is None else record.cause.model_dump(),
    )


def _failure_entry(where: str, rel: str, generation: int, data: bytes) -> Entry:
    """An unordered batch's failure record: FAILED, nothing written, at the time it failed."""
    try:
        failure = BatchFailure.decode(data, where)
    except ConfigError as exc:
        return _unreadable(where, rel, generation, str(exc))
    return Entry(
        rel=failure.rel,
        generation=failure.success_generation,
        outcome=BatchOutcome.FAILED.value,
        rows_read=0,
        rows_written=0,
        bad_rows=0,
        seconds=0.0,
        snapshot_id=None,
        finished_at=failure.failed_at,
        job_id=failure.job_id,
        error=failure.error,
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
    return (
        ResultView(
            rel=record.rel,
            success_generation=record.success_generation,
            outcome=_outcome(record),
            rows_written=record.rows_written,
            bad_rows=record.bad_rows,
            finished_at=record.finished_at,
            job_id=record.job_id,
            object=where,
        ),
        None,
    )
