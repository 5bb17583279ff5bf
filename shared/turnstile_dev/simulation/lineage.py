"""Schedules with dependencies: sources arriving out of step, an ordered table that waits for
another, and a derived table whose steps the in-process job stand-in applies.

Invariants, on top of every table's own:
- a dependent never commits the batch (or step) of period [T, E) before each source has committed
  a batch whose period ends at E + offset or later;
- no step commits before its end plus the delay;
- the derived table commits each step from `start` up to where every source allows exactly once,
  in order;
- once the sources are complete and faults stop, nothing is left waiting (backlogs drain);
- with gap-aware sources (`gaps: "wait"`, the operator marking each missing hour with `turnstile
  mark-missing` now and then, and all of them once faults stop), a dependent never commits the
  period [T, E) before every hour of each source from its first committed one up to E + offset was
  committed or marked missing (sources with `gaps: "ignore"` keep the last-commit rule above);
- once everything has drained, the derived table equals its transform over the sources' final
  commits (`rebuild_violations`): a step reads, of each source, the hours of its window (its own
  hour, and the hour before with an offset of -1 h); each step's last build read every such hour as
  last committed (`mode: "replace_window"`, where a source period committed after a step was built
  queues its rebuild), or the step is reported STALE (`mode: "append"`, never rebuilt); no rebuild
  is applied twice.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from turnstile.names.naturaltime import PRESETS
from turnstile.names.paths import Table
from turnstile.ops import mark_missing as missing_ops
from turnstile.ops.errors import Refused
from turnstile.protocol.context import Invocation
from turnstile.protocol.dependencies import step_rel
from turnstile.protocol.rebuilds import is_rebuild
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
    gaps: str = "ignore"  # the sources' `gaps`: "wait" (the operator marks missing hours) or "ignore"
    mode: str = "append"  # the derived table's: "replace_window" (steps rebuilt) or "append" (STALE)

    @staticmethod
    def draw(rng: random.Random, tables: dict[str, list[str]]) -> LineagePlan:
        offsets = {prefix: rng.choice([0, 0, -1]) for prefix in tables}
        dependent = None
        prefixes = list(tables)
        if len(prefixes) >= 2:
            table, source = prefixes[1], prefixes[0]
            if end_of(tables[source][-1]) >= end_of(tables[table][-1]):  # its wait can end
                dependent = (table, source)
        # Drawn apart from `rng`, so that every later draw of the schedule stays what it was.
        gaps = random.Random(repr(tables)).choice(["wait", "ignore"])
        mode = random.Random(f"mode {tables!r}").choice(["replace_window", "append"])
        return LineagePlan(offsets, rng.choice([0, 10, 30]), rng.choice([1, 2, 6]), dependent, gaps, mode)


def rel_of_hour(hour: int) -> str:
    return f"incremental/{BASE + timedelta(hours=hour):%Y/%m/%d/%H}"


def end_of(rel: str) -> datetime:
    end = PRESETS["hourly"].end(rel)
    if end is None:
        raise ValueError(f"{rel!r} names no hour")
    return end


def load_json(plan: LineagePlan, prefix: str, base: dict[str, Any]) -> dict[str, Any]:
    """A source's load.json: an hourly natural time, and for the dependent its dependency."""
    load = base | {"natural_time": "hourly", "gaps": plan.gaps}
    if plan.dependent is not None and plan.dependent[0] == prefix:
        load["depends_on"] = [plan.dependent[1].replace("/", ".")]
    return load


def derived_load_json(plan: LineagePlan, base: dict[str, Any]) -> dict[str, Any]:
    return (
        base
        | {
            "derived": {"step": "1h", "start": BASE.isoformat(), "maxstep": f"{plan.maxstep_hours}h"},
            "depends_on": [
                {"table": prefix.replace("/", "."), "offset": f"{offset}h"}
                for prefix, offset in plan.offsets.items()
            ],
            "delay": f"{plan.delay_minutes}m",
            "mode": plan.mode,
        }
        | ({"time_column": "ts", "partition_by": ["hours(ts)"]} if plan.mode == "replace_window" else {})
    )


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


def violations(
    plan: LineagePlan,
    tables: dict[str, list[str]],
    commits: list[Commit],
    marked: dict[tuple[str, datetime], float] | None = None,
) -> list[str]:
    found = []
    # A reprocess request builds a committed step once more, deliberately: not a step applied twice.
    steps = [c.rel for c in commits if c.table == DERIVED and c.reprocess is None]
    expected = expected_steps(plan, tables)
    if steps != expected:
        found.append(f"{DERIVED}: committed steps {steps}, expected {expected} each once in order")
    # Gap-aware sources may reach a period's end by an hour marked missing, not only by a commit:
    # every hour up to it committed or marked, the stronger rule, replaces "some commit reached it".
    early = too_early if plan.gaps == "ignore" else functools.partial(gap_violations, marked=marked or {})
    found += early(commits, DERIVED, plan.offsets, _step_end)
    delay = timedelta(minutes=plan.delay_minutes)
    for commit in (c for c in commits if c.table == DERIVED):
        at = EPOCH + timedelta(seconds=commit.at)
        if at < _step_start(commit.rel) + STEP + delay:
            found.append(f"{DERIVED}: committed {commit.rel} at {at.isoformat()}, before its delay passed")
    if plan.dependent is not None:
        table, source = plan.dependent
        found += early(commits, table, {source: 0}, end_of)
    return found


def _step_end(rel: str) -> datetime:
    return _step_start(rel) + STEP


def _step_start(rel: str) -> datetime:
    return datetime.strptime(rel, "%Y/%m/%d/%H").replace(tzinfo=UTC)


def missing_hours(rels: list[str]) -> list[datetime]:
    """The starts of the hours between a source's first and last batch that have none."""
    ends = sorted(end_of(r) for r in rels)
    present = {e - STEP for e in ends}
    found, at = [], ends[0] - STEP
    while at < ends[-1] - STEP:
        if at not in present:
            found.append(at)
        at += STEP
    return found


def mark_missing(
    inv: Invocation,
    prefix: str,
    hours: list[datetime],
    *,
    marked: dict[tuple[str, datetime], float],
    done: set[tuple[str, datetime]],
    now: float,
) -> int:
    """The operator's `turnstile mark-missing` of each hour not marked yet (refused while the source
    has committed nothing: tried again later). `marked` keeps the first try's time (a try cut short
    by a crash may have declared the hour), `done` the hours marked. Returns how many it marked."""
    table = Table(inv.store.bucket, prefix, *prefix.split("/"))
    count = 0
    for start in hours:
        if (prefix, start) in done:
            continue
        marked.setdefault((prefix, start), now)
        try:
            missing_ops.mark_missing(inv, table, f"{start:%Y/%m/%d/%H}", reason="simulated")
        except Refused as exc:
            if "already" not in str(exc):
                continue
        done.add((prefix, start))
        count += 1
    return count


def gap_violations(
    commits: list[Commit],
    table: str,
    sources: dict[str, int],
    period_end: Any,
    *,
    marked: dict[tuple[str, datetime], float],
) -> list[str]:
    """Each commit of `table` (period ending at `period_end(rel)`) made before every hour of a
    source, from its first committed hour to that end plus the offset, was committed or marked."""
    found = []
    for commit in (c for c in commits if c.table == table):
        end = period_end(commit.rel)
        for source, offset in sources.items():
            own = [c for c in commits if c.table == source]
            if not own:
                continue
            first = end_of(min(own, key=lambda c: c.at).rel) - STEP
            done = {end_of(c.rel) - STEP for c in own if c.at < commit.at}
            at = first
            while at < end + timedelta(hours=offset):
                if at not in done and marked.get((source, at), commit.at + 1) > commit.at:
                    found.append(
                        f"{table}: committed {commit.rel} before {source}'s hour {at.isoformat()} was "
                        "committed or marked missing"
                    )
                    break
                at += STEP
    return found


Version = dict[tuple[str, datetime], int]  # (source, hour) -> its commit (index in the commit log)


def window(plan: LineagePlan, step: str) -> list[tuple[str, datetime]]:
    """The source hours step `step` reads: its own, and with an offset of -1 h the hour before (what
    `dependencies.steps_over` rebuilds it for)."""
    start = _step_start(step)
    return [
        (source, start + timedelta(hours=h))
        for source, offset in plan.offsets.items()
        for h in range(min(0, offset), 1 + max(0, offset))
    ]


def versions(commits: list[Commit], shown: dict[int, float], until: float) -> Version:
    """Which commit of each source hour main showed last at `until`."""
    found: Version = {}
    for index, c in enumerate(commits):
        if c.table != DERIVED and shown.get(id(c), c.at) <= until:
            found[(c.table, end_of(c.rel) - STEP)] = index
    return found


def rebuild_violations(
    plan: LineagePlan,
    commits: list[Commit],
    *,
    shown: dict[int, float],
    stale: set[str],
    pending: list[str],
    causes: dict[str, str],
) -> list[str]:
    """Once everything has drained: each step's last build read the sources' final commits of its
    window, or (append) the step is among the `stale` ones reported; no rebuild applied twice, and
    one per source change (`causes`: a rebuild's request -> the change its record names, REBUILT or
    SKIPPED by a retry), none of an append table, none left `pending`."""
    found = [f"{DERIVED}: rebuild {r} left unapplied" for r in pending]
    final = versions(commits, shown, float("inf"))
    derived = [c for c in commits if c.table == DERIVED]
    rebuilds = Counter(c.reprocess for c in derived if c.reprocess and is_rebuild(c.reprocess))
    found += [f"{DERIVED}: rebuild {r} applied {n} times" for r, n in sorted(rebuilds.items()) if n > 1]
    if plan.mode == "append" and rebuilds:
        found.append(f"{DERIVED}: an append table rebuilt (its rows added twice): {sorted(rebuilds)}")
    per_change = Counter((c.rel, causes.get(c.reprocess or "")) for c in derived if c.reprocess in rebuilds)
    for (rel, cause), n in sorted(per_change.items(), key=str):
        if cause is None:
            found.append(f"{DERIVED}: step {rel} rebuilt with no record naming its cause")
        elif n > 1:
            found.append(f"{DERIVED}: step {rel} rebuilt {n} times for one change of {cause}")
    last: dict[str, Commit] = {}
    for c in derived:
        last[c.rel] = c  # the log is in commit order
    for rel, built in sorted(last.items()):
        read = versions(commits, shown, built.read if built.read is not None else built.at)
        behind = [
            f"{source} {hour:%H}h"
            for source, hour in window(plan, rel)
            if read.get((source, hour)) != final.get((source, hour))
        ]
        if not behind:
            continue
        if plan.mode == "append" and rel in stale:
            continue
        what = "not reported STALE" if plan.mode == "append" else "never rebuilt"
        found.append(f"{DERIVED}: step {rel} was built from an older {', '.join(behind)}, {what}")
    return found
