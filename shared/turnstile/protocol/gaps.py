"""Gap-aware watermarks: pure functions over the periods a table has committed or declared.

A table with a natural time is complete up to its watermark: the end of the last period up to which
every period since its first committed one is committed (a batch of it), or declared (a batch of it
dropped with `turnstile skip` or `unlock --skip-head`, or the period marked with `turnstile
mark-missing`). Periods follow each other every `period` from the first. What lies beyond a missing
period is kept as runs `[start, end)` (`Coverage.ahead`), so the watermark jumps over them once the
gap is filled. A batch finer than the period (its rel goes on below it) makes its period present
only in part: the watermark stops at the start of the latest period when that one is known only in
part, and passes it once a later period is present.

`gaps: "ignore"` keeps the end of the last period committed instead (`Coverage.last`), for sources
that legitimately skip periods.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from turnstile.config.lineage_config import GapsMode
from turnstile.names.naturaltime import NaturalTime

Run = tuple[datetime, datetime]  # [start, end) of consecutive present periods


@dataclass(frozen=True)
class Present:
    """A period some batch (or declaration) covers; `partial`: a batch finer than the period."""

    start: datetime
    partial: bool = False


@dataclass(frozen=True)
class Coverage:
    """What is known of a table's periods."""

    frontier: datetime | None = None  # every period before it is committed or declared
    ahead: tuple[Run, ...] = ()  # present periods at or after the frontier, in runs
    open: bool = False  # the latest present period is known only in part
    last: datetime | None = None  # where the last commit alone puts it (gaps: "ignore")

    def watermark(self, mode: GapsMode) -> datetime | None:
        """The watermark dependents read: the frontier, or with "ignore" the last commit's."""
        return self.last if mode == "ignore" else self.frontier

    def missing(self) -> datetime | None:
        """The start of the oldest missing period: the frontier when something present lies beyond
        it (a gap); None when there is none."""
        if self.frontier is None or not self.ahead or self.ahead[0][0] == self.frontier:
            return None
        return self.frontier

    def gap_end(self) -> datetime | None:
        """The end of the oldest gap (the start of the first present period beyond it)."""
        return self.ahead[0][0] if self.missing() is not None else None


def present(natural_time: NaturalTime, rel: str) -> Present | None:
    """The period the rel covers; None when it names none or an impossible one."""
    try:
        start = natural_time.start(rel)
    except ValueError:
        return None
    return None if start is None else Present(start, natural_time.finer(rel))


def _starts(runs: Iterable[Run], period: timedelta) -> set[datetime]:
    found: set[datetime] = set()
    for start, end in runs:
        at = start
        while at < end:
            found.add(at)
            at += period
    return found


def _runs(starts: Iterable[datetime], period: timedelta) -> tuple[Run, ...]:
    runs: list[Run] = []
    for start in sorted(starts):
        if runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], start + period)
        else:
            runs.append((start, start + period))
    return tuple(runs)


def add(coverage: Coverage, period: timedelta, found: Iterable[Present], mode: GapsMode = "wait") -> Coverage:
    """The coverage once the periods `found` are committed or declared. With "ignore" no gap is
    kept: the frontier follows the last commit (today's rule)."""
    items = list(found)
    if not items:
        return coverage
    last = coverage.last
    for item in items:
        end = item.start if item.partial else item.start + period
        last = end if last is None or end > last else last
    if mode == "ignore":
        return Coverage(frontier=last, ahead=(), open=False, last=last)
    starts = _starts(coverage.ahead, period)
    is_open = coverage.open
    for item in items:
        if coverage.frontier is not None and item.start < coverage.frontier:
            continue  # complete already
        top = max(starts, default=None)
        if top is None or item.start > top:
            is_open = item.partial
        elif item.start == top:
            is_open = is_open and item.partial
        starts.add(item.start)
    if not starts:
        return replace(coverage, last=last)
    top = max(starts)
    at = coverage.frontier if coverage.frontier is not None else min(starts)
    while at in starts and not (at == top and is_open):
        at += period
    remaining = {s for s in starts if s >= at}
    return Coverage(frontier=at, ahead=_runs(remaining, period), open=is_open and bool(remaining), last=last)


def parse_period(natural_time: NaturalTime, text: str) -> datetime:
    """A PERIOD written as the natural time's format (`2026/01/01/10` for "hourly"): its start.
    ValueError naming the expected format otherwise."""
    try:
        parsed = datetime.strptime(text.strip().strip("/"), natural_time.format)
    except ValueError as exc:
        example = datetime(2026, 1, 1, 10).strftime(natural_time.format)
        raise ValueError(
            f"{text!r} is not a period of this table: write it in its natural_time format "
            f"{natural_time.format!r}, e.g. {example!r}"
        ) from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
