"""Schedules with dependencies: sources arriving out of step, an ordered table that waits for
another, and a derived table whose steps the in-process job stand-in applies.

Invariants, on top of every table's own:
- a dependent never commits the batch (or step) of period [T, E) before each source has committed
  a batch whose period ends at E + offset or later;
- no step commits before its end plus the delay;
- the derived table commits each step from `start` up to where every source allows exactly once,
  in order;
- once the sources are complete and faults stop, nothing is left waiting (backlogs drain).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from turnstile.names.naturaltime import PRESETS
from turnstile.protocol.dependencies import step_rel
from turnstile_dev.simulation.adapters import Commit
from turnstile_dev.simulation.engine import EPOCH

DERIVED = "dsd/fact"
# The data's hours start 46 h before the simulated clock does: the last ones end after it starts,
# so their steps also wait for the delay, and only the sweeper wakes them when it expires.
BASE = datetime(2025, 12, 30, 2, tzinfo=UTC)
STEP = timedelta(hours=1)


@dataclass(frozen=True)
class LineagePlan:
    offsets: dict[str, int]  # source prefix -> offset of the derived table's dependency, in hours
    delay_minutes: int
    maxstep_hours: int
    dependent: tuple[str, str] | None  # (table, source): an ordered table of files waiting for another

    @staticmethod
    def draw(rng: random.Random, tables: dict[str, list[str]]) -> LineagePlan:
        offsets = {prefix: rng.choice([0, 0, -1]) for prefix in tables}
        dependent = None
        prefixes = list(tables)
        if len(prefixes) >= 2:
            table, source = prefixes[1], prefixes[0]
            if end_of(tables[source][-1]) >= end_of(tables[table][-1]):  # its wait can end
                dependent = (table, source)
        return LineagePlan(offsets, rng.choice([0, 10, 30]), rng.choice([1, 2, 6]), dependent)


def rel_of_hour(hour: int) -> str:
    return f"incremental/{BASE + timedelta(hours=hour):%Y/%m/%d/%H}"


def end_of(rel: str) -> datetime:
    end = PRESETS["hourly"].end(rel)
    if end is None:
        raise ValueError(f"{rel!r} names no hour")
    return end


def load_json(plan: LineagePlan, prefix: str, base: dict[str, Any]) -> dict[str, Any]:
    """A source's load.json: an hourly natural time, and for the dependent its dependency."""
    load = base | {"natural_time": "hourly"}
    if plan.dependent is not None and plan.dependent[0] == prefix:
        load["depends_on"] = [plan.dependent[1].replace("/", ".")]
    return load


def derived_load_json(plan: LineagePlan, base: dict[str, Any]) -> dict[str, Any]:
    return base | {
        "derived": {"step": "1h", "start": BASE.isoformat(), "maxstep": f"{plan.maxstep_hours}h"},
        "depends_on": [
            {"table": prefix.replace("/", "."), "offset": f"{offset}h"}
            for prefix, offset in plan.offsets.items()
        ],
        "delay": f"{plan.delay_minutes}m",
    }


def expected_steps(plan: LineagePlan, tables: dict[str, list[str]]) -> list[str]:
    """The steps the derived table must hold once every source is complete."""
    steps = []
    at = BASE
    while all(at + STEP + timedelta(hours=plan.offsets[p]) <= end_of(rels[-1]) for p, rels in tables.items()):
        steps.append(step_rel(at))
        at += STEP
    return steps


def too_early(commits: list[Commit], table: str, sources: dict[str, int], period_end: Any) -> list[str]:
    """Each commit of `table` whose period ends at `period_end(rel)` made before every source had
    committed up to that end plus its offset (hours)."""
    found = []
    for commit in (c for c in commits if c.table == table):
        end = period_end(commit.rel)
        for source, offset in sources.items():
            needed = end + timedelta(hours=offset)
            if not any(c.table == source and c.at < commit.at and end_of(c.rel) >= needed for c in commits):
                found.append(f"{table}: committed {commit.rel} before {source} reached {needed.isoformat()}")
    return found


def violations(plan: LineagePlan, tables: dict[str, list[str]], commits: list[Commit]) -> list[str]:
    found = []
    # A reprocess request builds a committed step once more, deliberately: not a step applied twice.
    steps = [c.rel for c in commits if c.table == DERIVED and c.reprocess is None]
    expected = expected_steps(plan, tables)
    if steps != expected:
        found.append(f"{DERIVED}: committed steps {steps}, expected {expected} each once in order")
    found += too_early(commits, DERIVED, plan.offsets, lambda rel: _step_start(rel) + STEP)
    delay = timedelta(minutes=plan.delay_minutes)
    for commit in (c for c in commits if c.table == DERIVED):
        at = EPOCH + timedelta(seconds=commit.at)
        if at < _step_start(commit.rel) + STEP + delay:
            found.append(f"{DERIVED}: committed {commit.rel} at {at.isoformat()}, before its delay passed")
    if plan.dependent is not None:
        table, source = plan.dependent
        found += too_early(commits, table, {source: 0}, end_of)
    return found


def _step_start(rel: str) -> datetime:
    return datetime.strptime(rel, "%Y/%m/%d/%H").replace(tzinfo=UTC)
