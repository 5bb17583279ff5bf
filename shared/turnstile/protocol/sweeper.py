"""The sweeper (Cloud Scheduler, every few minutes): the fallback that keeps every table moving.

Per table it restarts a subscriber where the backlog is not empty but no run is live, wakes one
where the lock names a job that has ended (its done signal was lost or its function crashed), and
deletes stale claims. It never unlocks a FAILED table: it logs it, with the age of its lock, so the
alert keeps firing until a human acts.

Tables are found as `<dataset>/<table>/` folders (the default layout): two folder listings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from turnstile import logs
from turnstile.errors import ConfigError, PathError, PreconditionFailed
from turnstile.paths import CLAIM_PREFIX, IDENTIFIER, Table, claim_name
from turnstile.protocol.context import Invocation
from turnstile.protocol.subscriber import backlog_head, read_lock
from turnstile.records import Claim, ClaimState, LockState, wake_body
from turnstile.store.port import object_uri

log = logs.get("sweeper")


@dataclass(frozen=True)
class TableState:
    """What the sweeper read about one table."""

    lock_state: LockState
    lock_age: float | None  # seconds since the lock last changed
    job_finished: bool | None  # None: no job named, or the runner does not know it
    backlog: bool
    backfill_age: float | None  # None: no _BACKFILL
    backfill_claimed_live: bool  # a run holds the current _BACKFILL's claim, within its lease
    paused: bool
    gated: bool


def verdict(state: TableState, lease: float) -> str:
    """Pure: `blocked`, `wake` (write a new _BACKFILL), or `ok`."""
    if state.lock_state is LockState.FAILED:
        return "blocked"
    if state.lock_state is LockState.RUNNING:
        if state.job_finished:
            return "wake"  # the job ended but nobody finished it
        if state.job_finished is None and (state.lock_age or 0) > lease:
            return "wake"  # locked, never submitted, and the locker is long gone
        return "ok"
    if not state.backlog or state.paused or state.gated:
        return "ok"
    if state.backfill_age is None:
        return "wake"
    if state.backfill_claimed_live or state.backfill_age < lease:
        return "ok"  # a run is live, or its event may still be on the way
    return "wake"


def sweep(inv: Invocation) -> list[dict[str, Any]]:
    report = []
    for table in tables(inv):
        try:
            report.append(_sweep_table(inv, table))
        except (ConfigError, PathError) as exc:
            log.error(f"{table.uri}: cannot read its state: {exc}", extra={"table": table.prefix})
            report.append(
                {"table": object_uri(inv.store, table.prefix), "verdict": "unreadable", "error": str(exc)}
            )
    return report


def tables(inv: Invocation) -> list[Table]:
    found = []
    for dataset in inv.store.list_folders(""):
        if not IDENTIFIER.fullmatch(dataset.rstrip("/")):
            continue
        for folder in inv.store.list_folders(dataset):
            ds, tbl = folder.rstrip("/").split("/")
            if IDENTIFIER.fullmatch(tbl):
                found.append(Table(inv.store.bucket, f"{ds}/{tbl}", ds, tbl))
    return found


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else (now - then).total_seconds()


def _sweep_table(inv: Invocation, table: Table) -> dict[str, Any]:
    now = inv.clock.now()
    lock, _ = read_lock(inv, table)
    job_finished = None
    if lock.state is LockState.RUNNING and lock.job_id:
        status = inv.runner.status(lock.job_id)
        job_finished = None if status is None else status.state.finished
    backfill = inv.store.stat(table.backfill)
    gate = inv.settings.start_backfill_filename
    state = TableState(
        lock_state=lock.state,
        lock_age=_age(now, lock.updated_at),
        job_finished=job_finished,
        backlog=bool(backlog_head(inv, table, 1)),
        backfill_age=_age(now, backfill.updated) if backfill else None,
        backfill_claimed_live=backfill is not None
        and _claim_live(inv, claim_name(table.backfill, backfill.generation)),
        paused=inv.settings.wait_for_validation
        and backfill is not None
        and backfill.generation == lock.backfill_generation,
        gated=bool(gate) and inv.store.stat(table.gate(gate or "")) is None,
    )
    decided = verdict(state, inv.lease.total_seconds())
    if decided == "blocked":
        log.error(
            f"{table.uri} is blocked at batch {lock.failed_rel!r} since {lock.updated_at}; "
            f"run: {lock.unlock_command}",
            extra={
                "event": "table_blocked",
                "table": table.prefix,
                "bucket": table.bucket,
                "job_id": lock.job_id,
                "rel": lock.failed_rel,
                "lock_age_seconds": state.lock_age,
                "error": lock.error,
            },
        )
    elif decided == "wake":
        inv.store.write(table.backfill, wake_body())
        log.warning(
            "restarted a subscriber that was not live",
            extra={"event": "subscriber_restarted", "table": table.prefix},
        )
    swept = _sweep_claims(inv, table, now)
    return {
        "table": object_uri(inv.store, table.prefix),
        "verdict": decided,
        "lock": lock.state.value,
        "lock_age_seconds": state.lock_age,
        "claims_deleted": swept,
    }


def _claim_live(inv: Invocation, name: str) -> bool:
    found = inv.store.read(name)
    if found is None:
        return False
    try:
        held = Claim.decode(found.data, name)
    except ConfigError:
        return False
    return held.state is ClaimState.IN_PROGRESS and held.expires_at > inv.clock.now()


def _sweep_claims(inv: Invocation, table: Table, now: datetime) -> int:
    """Delete claims older than STALE_CLAIM_SECONDS. Only `_BACKFILL` events are claimed, and their
    claims sit in the table folder: one listing of that prefix finds them all."""
    stale = now - timedelta(seconds=inv.settings.stale_claim_seconds)
    deleted = 0
    for info in inv.store.list_objects(f"{table.prefix}/{CLAIM_PREFIX}"):
        if info.updated < stale:
            try:
                inv.store.delete(info.name, if_generation=info.generation)
                deleted += 1
            except PreconditionFailed:
                pass
    return deleted
