"""What `turnstile status` says of a table's lineage: its watermark and what it waits for."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from turnstile.core.errors import ConfigError
from turnstile.protocol import dependencies, lineage, rebuilds, reprocess, watermarks
from turnstile.protocol import lock as lock_io
from turnstile.protocol.context import Invocation
from turnstile.protocol.dependencies import Blocker, WaitForTable
from turnstile.protocol.state import TableState
from turnstile.state.records import Lock, LockState
from turnstile.store.port import object_uri


@dataclass(frozen=True)
class StaleView:
    """A step of an `append` derived table built before a source changed (`protocol.rebuilds`)."""

    rel: str
    source: str  # the source's folder
    source_rel: str
    source_generation: int
    source_reprocess: str | None  # the source's reprocess request, when that was the change
    since: datetime  # when it was found stale
    command: str  # `turnstile reprocess` of the step, run once its rows are deleted


SHOWN_STALE = 100  # stale steps listed per table


@dataclass(frozen=True)
class Waits:
    """What a table waits for now: its head batch's blockers, or with nothing queued a derived
    table's next step's (`step`), or a dependency that can never be met."""

    blockers: tuple[Blocker, ...] = ()
    step: str | None = None
    never_met: str | None = None


def current_waits(inv: Invocation, state: TableState, lock: Lock | None) -> Waits:
    """What the head batch waits for; a derived table with nothing queued: what its next step
    waits for (its steps are only queued once their sources allow). Raises ConfigError."""
    if lock is not None and lock.state is not LockState.FREE:
        return Waits()
    if state.never_met:  # the table's next run blocks it on this
        return Waits(never_met=state.never_met)
    if state.backlog(1):
        return Waits(tuple(state.blockers))
    if state.lineage is None:
        return Waits()
    step = lineage.next_step_blockers(inv, state.table, state.lineage, lock.position if lock else None)
    if step is None or not step[1]:
        return Waits()
    return Waits(tuple(step[1]), step=step[0])


def waits(inv: Invocation, state: TableState, lock: Lock | None, errors: list[str]) -> tuple[str, ...]:
    """`current_waits` in words, as `turnstile status` says them."""
    try:
        found = current_waits(inv, state, lock)
        if found.never_met:
            return (f"a dependency that can never be met: {found.never_met}",)
        described = [_describe(inv, b) for b in found.blockers]
    except ConfigError as exc:
        errors.append(str(exc))
        return ()
    if found.step is not None and described:
        described[0] = f"next step {found.step}: {described[0]}"
    return tuple(described)


def _describe(inv: Invocation, blocker: Blocker) -> str:
    """What a wait is for, and why a source does not move when status can tell: it is blocked (an
    operator must act), or it has no objects at all (not yet created, or a misspelt name)."""
    text = blocker.describe()
    if not isinstance(blocker, WaitForTable):
        return text
    held, _ = lock_io.read(inv, watermarks.table_at(inv, blocker.table))
    if held.state is LockState.FAILED:
        where = object_uri(inv.store, blocker.table)
        return f"{text}; {blocker.table} is BLOCKED at {held.failed_rel!r}: turnstile status {where}"
    if blocker.watermark is None and not lineage.holds_more_than_waits(inv.store, blocker.table):
        return (
            f"{text}; {blocker.table} has no objects in the bucket yet (a name is `dataset.table` for "
            "the folder dataset/table: check the name if it should exist)"
        )
    return text


SHOWN_WAITING = 10  # queued batches whose waits status spells out


def queued_waits(inv: Invocation, state: TableState, errors: list[str]) -> dict[str, tuple[str, ...]]:
    """Each of the first queued batches of a table with dependencies or a delay: what it waits for
    (the head's wait is `waits`'; one behind it also waits for the batches before it: order)."""
    if state.lineage is None or not state.lineage.gated:
        return {}
    try:
        queued = state.backlog(SHOWN_WAITING)
        marks = watermarks.watermarks(inv, state.lineage) if state.lineage.depends_on else {}
    except ConfigError as exc:
        errors.append(str(exc))
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for index, pointer in enumerate(queued):
        own = tuple(b.describe() for b in dependencies.blockers(state.lineage, pointer.rel, marks, state.now))
        behind = ("the batches queued before it (order)",) if index and found else ()
        if own or behind:
            found[pointer.rel] = own + behind
    return found


def watermark(inv: Invocation, state: TableState, errors: list[str]) -> datetime | None:
    if state.lineage is None or state.lineage.natural_time is None:
        return None
    try:
        found, _ = watermarks.read_watermark(inv, state.table)
    except ConfigError as exc:
        errors.append(str(exc))
        return None
    if found is None:
        return None
    if state.lineage.gaps == "ignore" and found.last is not None:
        return max(found.last, found.watermark)  # as its dependents read it
    return found.watermark


def gap_fields(inv: Invocation, state: TableState, errors: list[str]) -> dict[str, Any]:
    """`TableStatus`'s fields of the table's oldest missing period that holds its watermark
    (`watermarks.gap`): none when there is none."""
    if state.lineage is None:
        return {}
    try:
        found = watermarks.gap(inv, state.table, state.lineage)
    except ConfigError as exc:
        errors.append(str(exc))
        return {}
    if found is None:
        return {}
    where = object_uri(inv.store, state.table.prefix)
    return {
        "missing_period": found.missing,
        "missing_seconds": state.age(found.since) if found.since else None,
        "missing_holds": found.holds,
        "missing_over_max": over_max_gap_wait(state, found),
        "missing_command": f"turnstile mark-missing {where} {found.period}",
    }


def over_max_gap_wait(state: TableState, found: watermarks.Gap | None) -> bool:
    """Missing longer than `max_gap_wait`: the sweeper raises the watermark_gap alert."""
    if found is None or found.since is None or state.lineage is None:
        return False
    age = state.age(found.since)
    return age is not None and age > state.lineage.max_gap_wait.total_seconds()


def request_fields(inv: Invocation, state: TableState, cap: int, errors: list[str]) -> dict[str, Any]:
    """`TableStatus`'s fields of the table's reprocess requests (operators', and the protocol's
    rebuilds of derived steps: how many, the oldest's time) and of its STALE steps."""
    names = [info.name for info in inv.store.list_entries(reprocess.folder(state.table), limit=cap)]
    rebuilding = [name for name in names if rebuilds.is_rebuild(name)]
    try:
        stale = rebuilds.stale_steps(inv, state.table, SHOWN_STALE) if state.derived else []
    except ConfigError as exc:
        errors.append(str(exc))
        stale = []
    return {
        "reprocess_pending": len(names) - len(rebuilding),
        "rebuilds_pending": len(rebuilding),
        "rebuilds_oldest": rebuilds.requested_at(rebuilding[0]) if rebuilding else None,
        "stale_steps": tuple(
            StaleView(
                rel=s.rel,
                source=s.cause.table,
                source_rel=s.cause.rel,
                source_generation=s.cause.success_generation,
                source_reprocess=s.cause.reprocess,
                since=s.at,
                command=rebuilds.reprocess_command(inv, state.table, s.rel),
            )
            for s in stale
        ),
    }
