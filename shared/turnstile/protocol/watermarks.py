"""A table's watermark in the bucket (`_turnstile/watermark.json`): read it, move it forward with
compare-and-swap over the periods committed or declared (the pure rules of `protocol.gaps`), and
read the watermarks a dependent waits for.

A dependent reads a source's gap-aware watermark (the frontier), unless the source's config says
`gaps: "ignore"`: then where its last commit puts it. A source with `gaps: "ignore"` keeps no gap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from turnstile.config.lineage_config import GapsMode, Lineage
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.naturaltime import NaturalTime
from turnstile.names.paths import LOCK, Table, table_of_state_object
from turnstile.protocol import gaps, results
from turnstile.protocol.context import Invocation
from turnstile.protocol.gaps import Coverage, Present
from turnstile.state.records import APPLIED_OUTCOMES, BatchOutcome, BatchResult, Watermark
from turnstile.store.port import object_uri

log = logs.get("lineage")
MAX_CAS_ATTEMPTS = 20


def watermark_object(table: Table) -> str:
    return f"{table.internal}watermark.json"


def dependents_folder(table: Table) -> str:
    """Folder of the tables waiting for this one's watermark, with trailing slash."""
    return f"{table.internal}dependents/"


def table_at(inv: Invocation, prefix: str) -> Table:
    return table_of_state_object(inv.store.bucket, f"{prefix}/{LOCK}", inv.destination_regex(f"{prefix}/"))


def read_watermark(inv: Invocation, table: Table) -> tuple[Watermark | None, int]:
    found = inv.store.read(watermark_object(table))
    if found is None:
        return None, 0
    return Watermark.decode(found.data, object_uri(inv.store, found.name)), found.generation


def coverage(record: Watermark | None, natural_time: NaturalTime) -> Coverage:
    """The record as `gaps.Coverage`. A record written before gaps were tracked (no `last`) holds
    the last commit's watermark, and no gap; its period is open when its batch was finer."""
    if record is None:
        return Coverage()
    ahead = tuple((start, end) for start, end in record.ahead)
    is_open = record.open
    if record.last is None and not ahead:
        found = gaps.present(natural_time, record.rel)
        if found is not None and found.partial and found.start == record.watermark:
            ahead, is_open = ((found.start, found.start + natural_time.period),), True
    last = record.watermark if record.last is None else record.last
    return Coverage(record.watermark, ahead, is_open, last)


def mode_of(lineage: Lineage) -> GapsMode:
    """How dependents read the table's watermark: "ignore" only when its config says so."""
    return "ignore" if lineage.gaps == "ignore" else "wait"


def registered(inv: Invocation, table: Table) -> list[str]:
    """The folders of the tables registered as waiting for this one (one listing; the dependent's
    folder is in each marker's name)."""
    folder = dependents_folder(table)
    return [
        info.name[len(folder) :].removesuffix(".json").replace("~", "/")
        for info in inv.store.list_entries(folder)
    ]


@dataclass(frozen=True)
class Gap:
    """The oldest missing period of a table whose watermark waits for it."""

    missing: datetime  # its start
    until: datetime  # the start of the first period present beyond it
    since: datetime | None  # when it was first seen missing (a later period committed)
    holds: tuple[str, ...]  # the folders of the dependents registered with the table
    period: str  # the period as `turnstile mark-missing` takes it


def gap(inv: Invocation, table: Table, lineage: Lineage) -> Gap | None:
    """The table's oldest missing period, when its watermark waits for it (`gaps` "wait", or unset
    with dependents registered); None otherwise. Derived tables have none (their steps follow
    each other)."""
    natural_time = lineage.natural_time
    if natural_time is None or lineage.derived or lineage.gaps == "ignore":
        return None
    mark, _ = read_watermark(inv, table)
    found = coverage(mark, natural_time)
    missing, until = found.missing(), found.gap_end()
    if mark is None or missing is None or until is None:
        return None
    holds = tuple(registered(inv, table))
    if lineage.gaps is None and not holds:
        return None
    return Gap(missing, until, mark.gap_since, holds, missing.strftime(natural_time.format))


def has_dependents(inv: Invocation, table: Table) -> bool:
    """Whether a table that depends on this one has registered with it (one listing)."""
    return bool(inv.store.list_entries(dependents_folder(table), limit=1))


def tracking(inv: Invocation, table: Table, lineage: Lineage) -> GapsMode:
    """How the table keeps gaps: its `gaps`; unset, "wait" once a dependent has registered with it
    (before, the watermark follows the last commit, so a gap of a table no one depended on then does
    not hold a dependent added later)."""
    if lineage.gaps is not None:
        return lineage.gaps
    return "wait" if has_dependents(inv, table) else "ignore"


def source_mode(inv: Invocation, prefix: str) -> GapsMode:
    """A source's `gaps`, read from its config; "wait" when it cannot be read (the safe side)."""
    try:
        return mode_of(inv.configs.resolve(f"{prefix}/", partial=True).load.lineage)
    except (ConfigError, PathError):
        return "wait"


def watermarks(inv: Invocation, lineage: Lineage) -> dict[str, datetime | None]:
    """Each dependency's watermark as its dependents read it (one read each)."""
    found: dict[str, datetime | None] = {}
    for edge in lineage.depends_on:
        mark, _ = read_watermark(inv, table_at(inv, edge.prefix))
        if mark is None:
            found[edge.prefix] = None
        elif source_mode(inv, edge.prefix) == "ignore":
            found[edge.prefix] = mark.watermark if mark.last is None else max(mark.last, mark.watermark)
        else:
            found[edge.prefix] = mark.watermark
    return found


def advance(
    inv: Invocation, table: Table, lineage: Lineage, found: Sequence[Present], rel: str | None
) -> bool:
    """Add the periods `found` (committed by the batch `rel`, or declared: None) to the watermark,
    with compare-and-swap; True when the watermark a dependent reads moved (either kind). A
    declaration keeps the record's `rel` (the sweeper's repair lists the results from there)."""
    natural_time = lineage.natural_time
    if natural_time is None or not found:
        return False
    mode = tracking(inv, table, lineage)
    for _ in range(MAX_CAS_ATTEMPTS):
        current, generation = read_watermark(inv, table)
        before = coverage(current, natural_time)
        after = gaps.add(before, natural_time.period, found, mode)
        if after.frontier is None or (current is not None and current.last is not None and after == before):
            return False
        now = inv.clock.now()
        missing = after.missing()
        since = current.gap_since if current is not None and missing == before.missing() else None
        record = Watermark(
            watermark=after.frontier,
            rel=rel if rel is not None else (current.rel if current is not None else ""),
            updated_at=now,
            ahead=after.ahead,
            open=after.open,
            last=after.last,
            gap_since=None if missing is None else (since or now),
        )
        try:
            if generation:
                inv.store.replace(watermark_object(table), record.encode(), if_generation=generation)
            else:
                inv.store.create(watermark_object(table), record.encode())
        except PreconditionFailed:
            continue  # another writer moved it: look again
        _log(table, before, after)
        return after.frontier != before.frontier or after.last != before.last
    raise RuntimeError(f"{table.uri}: the watermark changed {MAX_CAS_ATTEMPTS} times while advancing it")


def _log(table: Table, before: Coverage, after: Coverage) -> None:
    if after.frontier != before.frontier and after.frontier is not None:
        log.info(
            "watermark advanced",
            extra={
                "event": "watermark_advanced",
                "table": table.prefix,
                "watermark": after.frontier.isoformat(),
            },
        )
    missing = after.missing()
    if missing is not None and missing != before.missing():
        log.warning(
            f"{table.uri}: period {missing.isoformat()} is missing while later ones are committed; "
            "the watermark waits for it (commit it, skip it, or turnstile mark-missing)",
            extra={"event": "period_missing", "table": table.prefix, "missing": missing.isoformat()},
        )


def results_from(table: Table, rel: str | None, *, past: bool = False) -> str:
    """A listing offset in the table's result records: at the batch `rel` (`past`: just after
    it: "0" follows "/"); the first of them when `rel` is None or empty."""
    root = f"{table.internal}results/"
    if not rel:
        return root
    return f"{root}{rel}0" if past else f"{root}{rel}/"


def recorded_periods(
    inv: Invocation, table: Table, natural_time: NaturalTime, start: str, end: str
) -> list[Present]:
    """The periods of the batches whose result records, listed from `start` to `end`
    (`results_from`), say they are applied or were dropped by an operator: what the watermark must
    hold when a subscriber stopped between the commits and the watermark."""
    if start >= end:
        return []
    found: list[Present] = []
    for info in inv.store.list_entries(f"{table.internal}results/", start_offset=start, end_offset=end):
        name = results.read_name(table, info.name)
        read = inv.store.read(info.name) if name is not None and not name.request else None
        if name is None or read is None:
            continue
        try:
            record = BatchResult.decode(read.data, read.name)
        except ConfigError:
            continue
        dropped = record.outcome is BatchOutcome.FAILED and (record.error or "").startswith(results.DROPPED)
        if record.outcome in APPLIED_OUTCOMES or dropped:
            period = gaps.present(natural_time, name.rel)
            if period is not None:
                found.append(period)
    return found
