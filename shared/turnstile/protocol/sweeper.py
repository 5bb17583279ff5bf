"""The sweeper (Cloud Scheduler, every few minutes): the fallback that keeps every table moving.

Per table it restarts a subscriber where the backlog is not empty but no run is live, wakes one
where the lock names a job that has ended (its done signal was lost or its function crashed),
deletes stale claims, publishes batches whose events never came (`reconcile`), and asks the runner
about jobs past their expected time (`watchdog`). It never
unlocks a FAILED table: it logs it, with the age of its lock, so the alert keeps firing until a
human acts. Each sweep logs one `table_backlog` line per table (pending batches, age of the oldest,
lag of the last commit; an unordered table's batches held by `turnstile pause` count as pending):
the log-based metrics and the dashboard of terraform/monitoring.tf.

Tables are found as `<dataset>/<table>/` folders (the default layout): two folder listings, and
deeper where a destination regex puts them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from turnstile.config.lineage_config import Lineage
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed, TurnstileError
from turnstile.names.paths import CLAIM_PREFIX, LOCK, Table, table_of_state_object
from turnstile.protocol import backlog, lineage, reprocess, watermarks
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.protocol.reconcile import reconcile
from turnstile.protocol.state import Subscriber, TableState
from turnstile.protocol.watchdog import watch
from turnstile.state.records import LockState, wake_body
from turnstile.store.port import object_uri

log = logs.get("sweeper")


class Verdict(StrEnum):
    OK = "ok"
    WAKE = "wake"  # write a new `_BACKFILL`
    BLOCKED = "blocked"  # a FAILED lock: alert, never unlock
    UNREADABLE = "unreadable"  # the table's state could not be read this time


@dataclass(frozen=True)
class SweepFacts:
    """What the sweeper needs to know about one table, read from its `TableState`."""

    lock_state: LockState
    lock_age: float | None  # seconds since the lock last changed
    job_finished: bool | None  # None: no job named, or the runner does not know it
    backlog: bool
    backfill_age: float | None  # None: no _BACKFILL
    backfill_claimed_live: bool  # a run holds the current _BACKFILL's claim, within its lease
    paused: bool
    gated: bool
    retry_pending: bool = False  # a transient failure's retry is scheduled and not due yet
    retry_due: bool = False  # ... and is due now
    waiting: bool = False  # the head waits for dependencies or its delay: their commits wake it


def verdict(state: SweepFacts, lease: float) -> Verdict:
    """Pure: what the sweeper does about one table."""
    if state.lock_state is LockState.FAILED:
        return Verdict.BLOCKED
    if state.lock_state is LockState.RUNNING:
        if state.job_finished:
            return Verdict.WAKE  # the job ended but nobody finished it
        if state.job_finished is None:  # the job service does not have the lock's job
            if state.retry_pending:
                return Verdict.OK  # its submit is tried again later
            if state.retry_due and not state.backfill_claimed_live:
                return Verdict.WAKE  # its submit's retry is due
            if (state.lock_age or 0) > lease:
                return Verdict.WAKE  # locked, never submitted, and the locker is long gone
        return Verdict.OK
    if not state.backlog or state.paused or state.gated or state.retry_pending or state.waiting:
        return Verdict.OK
    if state.retry_due and not state.backfill_claimed_live:
        return Verdict.WAKE  # the run that scheduled the retry has ended
    if state.backfill_age is None:
        return Verdict.WAKE
    if state.backfill_claimed_live or state.backfill_age < lease:
        return Verdict.OK  # a run is live, or its event may still be on the way
    return Verdict.WAKE


def sweep(inv: Invocation) -> list[dict[str, Any]]:
    """Sweep every table; one table's failure to be read is reported and never stops the others."""
    report = []
    found = tables(inv)
    for table in found:
        try:
            report.append(_sweep_table(inv, table))
        except TurnstileError as exc:
            kind = "cannot read its state" if isinstance(exc, ConfigError | PathError) else "sweep failed"
            log.error(
                f"{table.uri}: {kind}: {exc}",
                extra={"event": "sweep_table_failed", "table": table.prefix, "error": str(exc)},
            )
            report.append(
                {
                    "table": object_uri(inv.store, table.prefix),
                    "verdict": Verdict.UNREADABLE,
                    "error": str(exc),
                }
            )
    return report


MAX_TABLE_DEPTH = 4  # folders a custom DESTINATION_REGEX may put before a table's own folder


def tables(inv: Invocation, under: str = "") -> list[Table]:
    """Every table prefix of the bucket (or below the folder `under`): `<dataset>/<table>/` (the
    dataset folder may be `project.dataset`); where a destination regex is in force (DESTINATION_REGEX,
    or a `destinationRegex` in the `_config/load.json` cascade down to the folder), any folder at
    most MAX_TABLE_DEPTH deep that the regex matches as a whole table prefix. Reserved `_` folders
    are not walked."""
    found: list[Table] = []
    under = under.strip("/")
    level = [f"{under}/" if under else ""]
    depth = len(under.split("/")) + 1 if under else 1
    while level and depth <= MAX_TABLE_DEPTH:
        deeper = []
        for parent in level:
            for folder in inv.store.list_folders(parent):
                prefix = folder.rstrip("/")
                if prefix.rpartition("/")[2].startswith("_"):
                    continue
                regex = inv.destination_regex(folder)
                table = _table_at(inv.store.bucket, prefix, regex) if depth >= 2 else None
                if table is not None:
                    found.append(table)  # a table's own sub-folders are batches: not walked
                elif regex is not None or depth < 2:
                    deeper.append(folder)
        level = deeper
        depth += 1
    return found


def _table_at(bucket: str, prefix: str, regex: str | None) -> Table | None:
    try:
        return table_of_state_object(bucket, f"{prefix}/{LOCK}", regex)
    except PathError:
        return None


def facts(state: TableState) -> SweepFacts:
    held = state.lock
    job_finished = None
    if held.state is LockState.RUNNING and held.job_id:
        status = state.inv.runner.status(held.job_id)
        job_finished = None if status is None else status.state.finished
    return SweepFacts(
        lock_state=held.state,
        lock_age=state.lock_age,
        job_finished=job_finished,
        # A reprocess request waits like a queued batch (looked for only when the backlog is empty).
        backlog=bool(state.backlog(1)) or reprocess.pending(state.inv, state.table),
        backfill_age=state.backfill_age,
        backfill_claimed_live=state.subscriber is Subscriber.RUNNING,
        paused=state.paused or state.operator_pause is not None,
        gated=state.gated,
        retry_pending=held.retry_at is not None and held.retry_at > state.now,
        retry_due=held.retry_at is not None and held.retry_at <= state.now,
        waiting=held.state is LockState.FREE and bool(state.blockers),
    )


@dataclass(frozen=True)
class BacklogMetrics:
    """What the `table_backlog` line reports; None where it is not known from the reads made."""

    pending: int  # pointers queued (counted up to backlog.LOOKAHEAD) and unordered batches held
    pending_capped: bool  # the backlog listing was full: at least `pending` are queued
    oldest_pending_age_seconds: float | None  # 0 with nothing pending; None: the head went meanwhile
    last_commit_lag_seconds: float | None


def oldest_pending_age(state: TableState, head: PointerRef | None) -> float | None:
    """Seconds since the head pointer was published (one read). None if it went meanwhile or holds
    no pointer: the subscriber reports that when it reaches it; a metric must not stop the sweep."""
    if head is None:
        return None
    try:
        pointer = backlog.read(state.inv, head)
    except ConfigError:
        return None
    return None if pointer is None else state.age(pointer.published_at)


def backlog_metrics(state: TableState) -> BacklogMetrics:
    """From the backlog listing the sweep makes anyway and the lock, plus one pointer read, and the
    listing of the unordered batches held by `turnstile pause` (their records' times: no read), so
    that a forgotten pause of an unordered table ages like a paused ordered table's backlog. The
    lag of the last commit is the age of a lock released by a job that applied its batches (FREE,
    a position, no retry pending); while a job holds the table, or for an unordered table (no
    lock), it is not known here and left out (`turnstile status` reads the result records)."""
    queued = state.backlog(backlog.LOOKAHEAD)
    held = state.lock
    released = held.state is LockState.FREE and held.position is not None and not held.attempt
    oldest = oldest_pending_age(state, queued[0]) if queued else _derived_waiting(state)
    if state.held:
        held_age = state.age(min(info.updated for info in state.held)) or 0.0
        oldest = max(oldest or 0.0, held_age)
    return BacklogMetrics(
        pending=len(queued) + len(state.held),
        pending_capped=len(queued) >= backlog.LOOKAHEAD,
        oldest_pending_age_seconds=oldest,
        last_commit_lag_seconds=state.lock_age if released else None,
    )


def _derived_waiting(state: TableState) -> float:
    """A derived table with nothing queued: how long since its next step could have started, so
    that one whose sources never allow it ages like a backlog that does not move (two reads)."""
    found = state.derived
    if found is None or state.lock.state is not LockState.FREE:
        return 0.0
    due = lineage.next_step_due(state.inv, state.table, found, state.lock.position)
    return max(0.0, state.age(due) or 0.0)


def _sweep_table(inv: Invocation, table: Table) -> dict[str, Any]:
    state = TableState(inv, table)
    held = state.lock
    metrics = backlog_metrics(state)  # its backlog listing is the one `facts` reuses
    log.info(
        f"{table.uri}: {metrics.pending} batches pending",
        extra={"event": "table_backlog", "table": table.prefix, "bucket": table.bucket} | asdict(metrics),
    )
    found = facts(state)
    decided = verdict(found, inv.lease.total_seconds())
    if decided is Verdict.BLOCKED:
        log.error(
            f"{table.uri} is blocked at batch {held.failed_rel!r} since {held.updated_at}; "
            f"run: {held.unlock_command}",
            extra={
                "event": "table_blocked",
                "table": table.prefix,
                "bucket": table.bucket,
                "job_id": held.job_id,
                "rel": held.failed_rel,
                "lock_age_seconds": found.lock_age,
                "error": held.error,
            },
        )
    elif decided is Verdict.WAKE:
        inv.store.write(table.backfill, wake_body())
        log.warning(
            "restarted a subscriber that was not live",
            extra={"event": "subscriber_restarted", "table": table.prefix},
        )
    lineage_report = sweep_lineage(state)
    swept = _sweep_claims(inv, table, state.now)
    watched = watch(state)
    return {
        "table": object_uri(inv.store, table.prefix),
        "verdict": decided,
        "lock": held.state.value,
        "lock_age_seconds": found.lock_age,
        "claims_deleted": swept,
        "reconciled": reconcile(state),
        "jobs": asdict(watched),
    } | lineage_report


def sweep_lineage(state: TableState) -> dict[str, Any]:
    """Dependencies' lost wake-ups: a watermark behind the lock's position moves up (waking its
    dependents); a derived table with nothing queued publishes its due steps (and is woken)."""
    if state.never_met is not None and state.lock.state is LockState.FREE:
        ensure_subscriber(state.inv, state.table)  # its run blocks the table with the reason
        return {"never_met": state.never_met}
    found = state.lineage
    if found is None or (found.natural_time is None and not found.gated):
        return {}
    inv, table, held = state.inv, state.table, state.lock
    if found.depends_on:  # a dependent whose sources were always ahead has not waited: register it
        try:
            lineage.register(inv, table, found)
        except PathError:
            pass  # its subscriber reports a source it cannot name
    report: dict[str, Any] = {"watermark_repaired": lineage.repair(inv, table, held.position)}
    report |= gap_alert(state, found)
    if found.derived and not state.backlog(1):
        published = lineage.publish_due_steps(inv, table, found, held.position)
        if published:
            ensure_subscriber(inv, table)
        report["steps_published"] = published
    return report


def gap_alert(state: TableState, found: Lineage) -> dict[str, Any]:
    """A period missing longer than `max_gap_wait` while later ones are committed holds the table's
    dependents: the `watermark_gap` alert, on every sweep until it is filled."""
    try:
        missing = watermarks.gap(state.inv, state.table, found)
    except (ConfigError, PathError):
        return {}
    if missing is None:
        return {}
    age = state.age(missing.since) if missing.since else None
    if age is not None and age > found.max_gap_wait.total_seconds():
        table = state.table
        holds = ", ".join(missing.holds) or "no registered dependent"
        log.error(
            f"{table.uri}: period {missing.missing.isoformat()} has been missing for {int(age)}s (over "
            f"max_gap_wait) while later periods are committed; it holds {holds}. Let it land, drop it "
            f"(turnstile skip), or run: turnstile mark-missing {object_uri(state.inv.store, table.prefix)} "
            f"{missing.period}",
            extra={
                "event": "watermark_gap",
                "table": table.prefix,
                "bucket": table.bucket,
                "missing_period": missing.missing.isoformat(),
                "missing_seconds": age,
                "dependents": list(missing.holds),
            },
        )
    return {"missing_period": missing.missing.isoformat()}


def _sweep_claims(inv: Invocation, table: Table, now: datetime) -> int:
    """Delete claims older than STALE_CLAIM_SECONDS. Only `_BACKFILL` events are claimed, and their
    claims sit in the table folder: one listing of that prefix finds them all."""
    stale = now - timedelta(seconds=inv.settings.stale_claim_seconds)
    deleted = 0
    for info in inv.store.list_entries(f"{table.prefix}/{CLAIM_PREFIX}"):
        if info.updated >= stale:
            continue
        live = info if info.generation is not None else inv.store.stat(info.name)  # S3: one HEAD
        if live is None or live.generation is None or live.updated >= stale:
            continue
        try:
            inv.store.delete(info.name, if_generation=live.generation)
            deleted += 1
        except PreconditionFailed:
            pass
    return deleted
