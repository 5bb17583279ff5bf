"""What `turnstile status` says of a table's lineage: its watermark and what it waits for."""

from __future__ import annotations

from datetime import datetime

from turnstile.errors import ConfigError
from turnstile.protocol import lineage
from turnstile.protocol.context import Invocation
from turnstile.protocol.state import TableState
from turnstile.records import Lock, LockState


def waits(inv: Invocation, state: TableState, lock: Lock | None, errors: list[str]) -> tuple[str, ...]:
    """What the head batch waits for; a derived table with nothing queued: what its next step
    waits for (its steps are only queued once their sources allow)."""
    if lock is not None and lock.state is not LockState.FREE:
        return ()
    try:
        if state.backlog(1):
            return tuple(b.describe() for b in state.blockers)
        if state.lineage is None:
            return ()
        step = lineage.next_step_blockers(inv, state.table, state.lineage, lock.position if lock else None)
    except ConfigError as exc:
        errors.append(str(exc))
        return ()
    if step is None or not step[1]:
        return ()
    rel, blockers = step
    return (f"next step {rel}: " + blockers[0].describe(), *(b.describe() for b in blockers[1:]))


def watermark(inv: Invocation, state: TableState, errors: list[str]) -> datetime | None:
    if state.lineage is None or state.lineage.natural_time is None:
        return None
    try:
        found, _ = lineage.read_watermark(inv, state.table)
    except ConfigError as exc:
        errors.append(str(exc))
        return None
    return None if found is None else found.watermark
