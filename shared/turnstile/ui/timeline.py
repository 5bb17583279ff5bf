"""Where the table page's timeline draws each batch (pure): one row per batch, in the order they
apply; a thin bar from its arrival to its job, a thick one for its job up to its commit (or failure),
a mark where a dropped batch was dropped. The outcome is written beside each row, not shown by
colour alone."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from turnstile.ops.timeline import Span

LABEL_W = 250  # the rel's column
STATE_W = 100  # the outcome's column
PLOT_W = 620
ROW_H = 18
AXIS_H = 24
MIN_BAR = 3.0


@dataclass(frozen=True)
class Row:
    span: Span
    y: float
    wait: tuple[float, float] | None  # x from arrival to the job's start
    job: tuple[float, float] | None  # x from the job's start to its end (now for a running one)
    mark: float | None  # x of a point event: dropped, or queued with no job yet (its arrival)


@dataclass(frozen=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True)
class Drawing:
    rows: tuple[Row, ...]
    ticks: tuple[Tick, ...]
    width: float
    height: float
    start: datetime | None
    end: datetime | None
    plot_x: float


def draw(spans: list[Span], now: datetime) -> Drawing:
    times = [t for s in spans for t in (s.arrived, s.started, s.finished) if t is not None]
    plot_x = LABEL_W + STATE_W
    if not times:
        rows = tuple(Row(s, AXIS_H + i * ROW_H, None, None, None) for i, s in enumerate(spans))
        return Drawing(rows, (), plot_x + PLOT_W, AXIS_H + len(spans) * ROW_H + 4, None, None, plot_x)
    start = min(times)
    open_ended = any(s.state == "RUNNING" for s in spans)
    end = max([*times, now] if open_ended else times)
    if end <= start:
        end = start + timedelta(minutes=1)
    scale = PLOT_W / (end - start).total_seconds()

    def x(at: datetime) -> float:
        return plot_x + (at - start).total_seconds() * scale

    def bar(a: datetime | None, b: datetime | None) -> tuple[float, float] | None:
        if a is None or b is None:
            return None
        left, right = x(a), x(b)
        return (left, max(right, left + MIN_BAR))

    placed = []
    for index, span in enumerate(spans):
        finished = span.finished or (now if span.state == "RUNNING" else None)
        job = bar(span.started, finished)
        wait = bar(span.arrived, span.started) if span.started else None
        mark = None
        if job is None:
            point = span.finished or span.arrived
            mark = x(point) if point is not None else None
        placed.append(Row(span, AXIS_H + index * ROW_H, wait, job, mark))
    return Drawing(
        tuple(placed),
        ticks(start, end, plot_x),
        plot_x + PLOT_W + 8,
        AXIS_H + len(spans) * ROW_H + 4,
        start,
        end,
        plot_x,
    )


STEPS = (
    timedelta(seconds=10),
    timedelta(seconds=30),
    timedelta(minutes=1),
    timedelta(minutes=5),
    timedelta(minutes=15),
    timedelta(hours=1),
    timedelta(hours=3),
    timedelta(hours=6),
    timedelta(days=1),
    timedelta(days=7),
    timedelta(days=30),
)


def ticks(start: datetime, end: datetime, plot_x: float, most: int = 6) -> tuple[Tick, ...]:
    """Round times along the axis, at most `most` of them."""
    span = end - start
    step = next((s for s in STEPS if span / s <= most), None)
    if step is None:  # longer than the steps go: whole multiples of the longest
        step = STEPS[-1] * math.ceil(span / (STEPS[-1] * most))
    seconds = step.total_seconds()
    first = datetime.fromtimestamp((start.timestamp() // seconds + 1) * seconds, tz=start.tzinfo)
    shape = (
        "%H:%M:%S"
        if step < timedelta(minutes=1)
        else "%H:%M"
        if step < timedelta(days=1)
        else "%m-%d"
        if step < timedelta(days=30)
        else "%Y-%m-%d"
    )
    scale = PLOT_W / span.total_seconds()
    found = []
    at = first
    while at <= end:
        found.append(Tick(plot_x + (at - start).total_seconds() * scale, at.strftime(shape)))
        at += step
    return tuple(found)
