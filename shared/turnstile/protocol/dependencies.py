"""Watermarks and dependencies: pure functions of what was read, no I/O.

A table's watermark is gap-aware (`protocol.gaps`): the end of the last period up to which every
period is committed or declared. A batch whose period ends at E may start when every dependency's
watermark is at least E + offset and the clock has passed E + delay; a derived table's steps are
published up to where that holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from turnstile.config.lineage_config import Lineage
from turnstile.names.naturaltime import NaturalTime

MAX_STEPS_PER_WAKE = 240  # steps one wake-up publishes: a long catch-up continues on the next wake


@dataclass(frozen=True)
class WaitForTable:
    """A dependency's watermark has not reached `needed` yet."""

    table: str  # the dependency's folder
    needed: datetime
    watermark: datetime | None

    def describe(self) -> str:
        have = self.watermark.isoformat() if self.watermark else "none yet"
        return f"{self.table} to reach {self.needed.isoformat()} (its watermark: {have})"


@dataclass(frozen=True)
class WaitForDelay:
    """The clock has not passed the batch's period end plus the delay."""

    until: datetime

    def describe(self) -> str:
        return f"the delay until {self.until.isoformat()}"


@dataclass(frozen=True)
class Unreadable:
    """The batch's natural time cannot be read from its path: no job covers it as a batch that
    may start (the subscriber blocks the table when it is the head)."""

    error: str

    def describe(self) -> str:
        return f"an operator: {self.error}"


Blocker = WaitForTable | WaitForDelay | Unreadable


def period_end(natural_time: NaturalTime, rel: str) -> datetime | None:
    """The end of the rel's period; None when it names none or an impossible one (such a batch
    does not move the watermark; a gated one waits with the error, see `blockers`)."""
    try:
        return natural_time.end(rel)
    except ValueError:
        return None


def blockers(
    lineage: Lineage, rel: str, watermarks: Mapping[str, datetime | None], now: datetime
) -> tuple[Blocker, ...]:
    """What the batch `rel` still waits for; empty when it may start. A rel that names no natural
    time waits for nothing (it is not a period of time)."""
    if lineage.natural_time is None or not lineage.gated:
        return ()
    try:
        end = lineage.natural_time.end(rel)
    except ValueError as exc:
        return (Unreadable(str(exc)),)
    if end is None:
        return ()
    return period_blockers(lineage, end, watermarks, now)


def period_blockers(
    lineage: Lineage, end: datetime, watermarks: Mapping[str, datetime | None], now: datetime
) -> tuple[Blocker, ...]:
    """What a period ending at `end` waits for."""
    found: list[Blocker] = []
    for edge in lineage.depends_on:
        needed = end + edge.offset
        have = watermarks.get(edge.prefix)
        if have is None or have < needed:
            found.append(WaitForTable(edge.prefix, needed, have))
    if now < end + lineage.delay:
        found.append(WaitForDelay(end + lineage.delay))
    return tuple(found)


def due_steps(
    lineage: Lineage,
    after: datetime | None,
    watermarks: Mapping[str, datetime | None],
    now: datetime,
    limit: int = MAX_STEPS_PER_WAKE,
) -> list[datetime]:
    """The starts of the derived table's steps to publish: from `after` (the end of the last step
    published or committed; `start` when None) while each step may start."""
    if lineage.step is None or lineage.start is None:
        return []
    step = lineage.step
    begin = lineage.start if after is None else max(after, lineage.start)
    # Steps are aligned on `start`: a frontier inside a step (it cannot be, but be safe) rounds up.
    offset = (begin - lineage.start) % step
    begin = begin if offset == timedelta(0) else begin + (step - offset)
    starts: list[datetime] = []
    at = begin
    while len(starts) < limit and not period_blockers(lineage, at + step, watermarks, now):
        starts.append(at)
        at += step
    return starts


def steps_over(lineage: Lineage, start: datetime, end: datetime, offset: timedelta) -> list[datetime]:
    """The starts of a derived table's steps that read a source period `[start, end)`: those whose
    window overlaps it, or overlaps it shifted by the dependency's `offset` (a step ending at E
    waits for the source up to E + offset, so it may read that far)."""
    if lineage.step is None or lineage.start is None:
        return []
    step, first = lineage.step, lineage.start
    low, high = min(start, start - offset), max(end, end - offset)
    at = max(first, first + ((low - first) // step) * step)
    found = []
    while at < high:
        if at + step > low:
            found.append(at)
        at += step
    return found


def step_rel(start: datetime) -> str:
    """A step's batch folder below the table: the hourly layout, so path order is time order."""
    return start.strftime("%Y/%m/%d/%H")


def steps_per_job(lineage: Lineage, max_batches_per_job: int) -> int:
    """How many steps one job of a derived table covers: `maxstep` bounds the time of one job."""
    if lineage.steps_per_job is None:
        return max_batches_per_job
    return max(1, min(max_batches_per_job, lineage.steps_per_job))
