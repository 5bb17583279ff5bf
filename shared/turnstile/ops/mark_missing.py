"""`turnstile mark-missing`: declare that a period of a table will have no batch.

A table with a natural time has a gap-aware watermark: it stops at the first period with no batch
committed, while later ones are (docs/CONFIGURATION.md, Dependencies). When the period will never
come (the source had nothing to send, the data is lost), `mark-missing` records it under the
table's state (`_turnstile/missing/<start>.json`, in the state bucket when there is one) and adds it
to the watermark as if it were committed, so the watermark passes it and the dependents go on.

Refused, changing nothing, for a table with no natural time, a derived table, a table that has
committed nothing yet, a PERIOD that does not read as the natural time's format (the error names
the format), one that has not begun, and one already committed or declared. Running it again
after it was interrupted completes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from turnstile.config.lineage_config import Lineage
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names.paths import Table
from turnstile.ops.errors import Refused
from turnstile.protocol import gaps, lineage, watermarks
from turnstile.protocol.context import Invocation
from turnstile.protocol.gaps import Present
from turnstile.state.records import MissingPeriod
from turnstile.store.port import object_uri

log = logs.get("mark-missing")

DOES = (
    "Declare a period of a table with a natural time that will have no batch: the watermark passes "
    "it as if it were committed, and the tables that depend on it go on."
)


@dataclass(frozen=True)
class Marked:
    table: str  # gs:// or s3:// URI of the table
    period: str  # as given
    start: datetime
    record: str  # URI of the record written
    watermark: datetime | None  # the gap-aware watermark after it
    missing: datetime | None  # the oldest period still missing after it, if any

    def lines(self) -> list[str]:
        said = [f"period {self.period} of {self.table} ({self.start.isoformat()}) is recorded as missing"]
        said.append(f"recorded in {self.record}")
        mark = self.watermark.isoformat() if self.watermark else "none"
        said.append(f"watermark: {mark}")
        if self.missing is not None:
            said.append(
                f"still missing: the period from {self.missing.isoformat()} (turnstile status {self.table})"
            )
        return said

    def to_json(self) -> dict[str, object]:
        return {
            "table": self.table,
            "period": self.period,
            "start": self.start,
            "record": self.record,
            "watermark": self.watermark,
            "missing": self.missing,
        }


def missing_object(table: Table, start: datetime) -> str:
    return f"{table.internal}missing/{start:%Y%m%dT%H%M%SZ}.json"


def question(table_uri: str, period: str) -> str:
    """What the CLI asks before marking."""
    return f"record period {period} of {table_uri} as missing: its dependents go on without it?"


def check(inv: Invocation, table: Table, period: str) -> tuple[Lineage, datetime]:
    """The table's lineage and the period's start; Refused (nothing changed) when the period cannot
    be marked: see the module's docstring."""
    where = object_uri(inv.store, table.prefix)
    try:
        found = lineage.configured(inv, table)
    except ConfigError as exc:
        raise Refused(f"{where}: its config cannot be read ({exc}); fix it, then mark the period") from exc
    natural_time = found.natural_time
    if natural_time is None:
        raise Refused(
            f'{where} has no natural_time, so it has no periods to mark: set "natural_time" in its '
            "_config/load.json"
        )
    if found.derived:
        raise Refused(
            f"{where} is a derived table: turnstile builds each of its steps; nothing can be missing"
        )
    try:
        start = gaps.parse_period(natural_time, period)
    except ValueError as exc:
        raise Refused(f"{where}: {exc}") from exc
    if start > inv.clock.now():
        raise Refused(f"{where}: period {period} ({start.isoformat()}) has not begun; mark it once it has")
    mark, _ = watermarks.read_watermark(inv, table)
    if mark is None:
        raise Refused(
            f"{where} has committed nothing yet: its watermark starts at its first committed period, so "
            "no period before it is missing; mark it once a later period is committed"
        )
    coverage = watermarks.coverage(mark, natural_time)
    if coverage.frontier is not None and start + natural_time.period <= coverage.frontier:
        raise Refused(
            f"{where}: period {period} is before the watermark ({coverage.frontier.isoformat()}): it is "
            f"committed or declared already (turnstile history {where})"
        )
    if any(first <= start < end for first, end in coverage.ahead):
        raise Refused(f"{where}: period {period} has batches committed or is declared already")
    return found, start


def mark_missing(inv: Invocation, table: Table, period: str, reason: str | None = None) -> Marked:
    """Record the period as missing and add it to the watermark (waking the dependents)."""
    found, start = check(inv, table, period)
    name = missing_object(table, start)
    record = MissingPeriod(period=period, start=start, reason=reason, at=inv.clock.now())
    try:
        inv.store.create(name, record.encode())
    except PreconditionFailed:
        pass  # marked before, interrupted before the watermark: complete it
    lineage.declare(inv, table, found, [Present(start)])
    log.warning(
        f"period {period} of {table.uri} marked missing by an operator",
        extra={"event": "period_marked_missing", "table": table.prefix, "period": period, "reason": reason},
    )
    mark, _ = watermarks.read_watermark(inv, table)
    natural_time = found.natural_time
    coverage = watermarks.coverage(mark, natural_time) if natural_time else gaps.Coverage()
    where = object_uri(inv.store, table.prefix)
    return Marked(where, period, start, object_uri(inv.store, name), coverage.frontier, coverage.missing())
