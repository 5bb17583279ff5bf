"""`turnstile status`: what each table's state objects say, read-only.

Per table, one listing of its state objects (`<table>/_`) says what exists, and only that is read:
the lock, the pointer at the head of the backlog (its age: the oldest pending batch's; a backlog
longer than `BACKLOG_CAP` shows as "1000+"), `_BACKFILL`'s claim, the result record written last
(the listing's update times say which), the watermark, a pause; besides, the gate file and the
ORDERME files of the table's `incremental/` and `historical/` folders, and the config levels above
it (read once per invocation)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from turnstile.config.cascade import ORDERED_KINDS, ORDERME, levels
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.paths import CONFIG, LOCK, Table, table_of_state_object
from turnstile.ops import publish as publish_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops import status_lineage
from turnstile.ops.history import ResultView, last_result
from turnstile.ops.status_jobs import OpenJobView, open_jobs
from turnstile.ops.status_views import FailedView, LockView, failed_view, lock_view
from turnstile.protocol import results
from turnstile.protocol.context import Invocation
from turnstile.protocol.lineage import holds_more_than_waits
from turnstile.protocol.state import TableState
from turnstile.protocol.sweeper import oldest_pending_age
from turnstile.protocol.sweeper import tables as all_tables
from turnstile.state.records import BatchOutcome, Lock, LockState
from turnstile.store.listed import ListedStore
from turnstile.store.port import PlacedStore, object_uri

BACKLOG_CAP = 1000
FAILED_SHOWN = 100  # failure records listed per table


class Health(StrEnum):
    """One word per table, worst first."""

    UNREADABLE = "UNREADABLE"  # a state object does not hold what turnstile wrote
    BLOCKED = "BLOCKED"  # FAILED lock: nothing moves until `turnstile unlock`
    FAILED = "FAILED"  # unordered batches failed (`turnstile retry`), or derived steps are STALE
    STALLED = "STALLED"  # a backlog, a free lock, and no live subscriber: the sweeper (or resume) restarts it
    RETRYING = "RETRYING"  # a transient failure: the head's job is tried again at the lock's retry_at
    RUNNING = "RUNNING"  # a job holds the table, or an unordered job runs
    QUEUED = "QUEUED"  # a backlog and a live subscriber
    GATED = "GATED"  # a backlog held until the gate file exists
    WAITING = "WAITING"  # the head batch waits for dependencies' watermarks or its delay
    PAUSED = "PAUSED"  # `turnstile pause`, or WAIT_FOR_VALIDATION waiting for a new _BACKFILL
    IDLE = "IDLE"  # nothing queued

    @property
    def is_problem(self) -> bool:
        return self in (Health.UNREADABLE, Health.BLOCKED, Health.FAILED)


@dataclass(frozen=True)
class SubscriberView:
    state: str  # idle | pending | running | stopped | abandoned | lost
    live: bool
    backfill_generation: int | None = None
    backfill_age_seconds: float | None = None
    claim_owner: str | None = None
    claim_expires_at: datetime | None = None


@dataclass(frozen=True)
class PauseView:
    reason: str | None
    at: datetime
    resume_command: str


@dataclass(frozen=True)
class TableStatus:
    table: str  # dataset.table
    uri: str
    health: Health
    ordered: bool
    ordered_by: tuple[str, ...]
    backlog_depth: int
    backlog_capped: bool  # more than `backlog_depth` pointers are queued
    backlog_head: str | None
    oldest_pending_age_seconds: float | None  # since the head's pointer was published; None: no backlog
    last_commit_lag_seconds: float | None  # since `last_result` finished; None: none, or it failed
    lock: LockView | None
    subscriber: SubscriberView
    gate: str | None  # the START_BACKFILL_FILENAME object, when one is configured
    gate_present: bool | None
    last_applied: str | None  # the lock's position: rel of the last batch applied or skipped
    last_result: ResultView | None
    errors: tuple[str, ...] = field(default=())
    failed_batches: tuple[FailedView, ...] = field(default=())  # unordered batches whose job failed
    retrying: int = 0  # of those, how many the sweeper retries by itself
    reprocess_pending: int = 0  # operators' `turnstile reprocess` requests not applied yet
    rebuilds_pending: int = 0  # derived steps to rebuild after a source changed (`protocol.rebuilds`)
    rebuilds_oldest: datetime | None = None  # the oldest of those: its source change's commit time
    stale_steps: tuple[status_lineage.StaleView, ...] = ()  # `append` steps a source change left stale
    paused: PauseView | None = None  # `turnstile pause`: no job starts until `turnstile resume`
    held: int = 0  # unordered batches that arrived while paused, submitted on resume
    open_jobs: tuple[OpenJobView, ...] = field(default=())  # unordered jobs not ended (or not settled)
    watermark: datetime | None = None  # tables with natural_time: committed with no gap up to here
    watermark_lag_seconds: float | None = None  # how far the watermark is behind the clock
    missing_period: datetime | None = None  # the oldest period missing while later ones are committed
    missing_seconds: float | None = None  # since it was first seen missing
    missing_holds: tuple[str, ...] = ()  # the dependents it holds (folders)
    missing_over_max: bool = False  # missing longer than max_gap_wait: the watermark_gap alert
    missing_command: str | None = None  # `turnstile mark-missing` for it
    waiting_for: tuple[str, ...] = field(default=())  # what the head batch waits for
    # The first queued batches that wait, each with what it waits for (dependencies, delay, order).
    waiting_batches: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tables_under(inv: Invocation, prefix: str) -> list[Table]:
    """The tables a `gs://BUCKET[/PREFIX]` argument names: all of them, a dataset's, or one."""
    parts = [p for p in prefix.split("/") if p]
    bucket = inv.store.bucket
    regex = inv.settings.destination_regex
    if regex and parts:  # the table the prefix is, or those the regex finds below it
        try:
            found = [table_of_state_object(bucket, f"{'/'.join(parts)}/{LOCK}", regex)]
        except PathError:
            found = all_tables(inv, "/".join(parts))
    elif not parts:
        found = all_tables(inv)
    elif len(parts) == 1:
        table_of_state_object(bucket, f"{parts[0]}/any/{LOCK}")  # the dataset name must be valid
        found = all_tables(inv, parts[0])  # a folder whose name is no identifier is no table
    else:
        found = [table_of_state_object(bucket, f"{'/'.join(parts)}/{LOCK}")]
    # Folders starting with `_` (`_config/`, `_failed/`...) are turnstile's own, never tables.
    return [t for t in found if not t.dataset.startswith("_") and not t.table.startswith("_")]


class Progress(Protocol):
    """What a reading of many tables says as it goes (`statuses`; the console shows it): called
    from the threads that read the tables."""

    def found(self, tables: int) -> None:
        """The tables to read, once the search for them is done."""

    def read(self, shown: TableStatus | None) -> None:
        """One table read: its status, or None for a folder that is not shown."""


def statuses(
    inv: Invocation,
    prefix: str,
    orderme_cache: dict[str, bool],
    *,
    workers: int = 1,
    one_listing: bool = False,
    progress: Progress | None = None,
) -> list[TableStatus]:
    """The status of each table `tables_under` the prefix, but a folder that holds nothing but the
    waits of other tables on it (a `depends_on` naming a table with no batches or config yet).
    `workers` tables are read at once (tables share nothing but the invocation's caches of config
    levels and ORDERME files). Each table is read through one listing of its state objects
    (`table_status`); with `one_listing`, one listing of the whole prefix serves every table and
    the search for them (fewer requests where a listing costs the same whatever it holds, as on
    fake-gcs-server, which walks the whole bucket for each; not on a split store, whose state
    bucket is listed per table folder). `progress` hears of each table as it is read."""
    if one_listing:
        inv = prefix_listing(inv, prefix)
    tables = tables_under(inv, prefix)
    if progress is not None:
        progress.found(len(tables))

    def one(table: Table) -> TableStatus | None:
        shown = _shown(inv, table, orderme_cache)
        if progress is not None:
            progress.read(shown)
        return shown

    if workers > 1 and len(tables) > 1:
        with ThreadPoolExecutor(min(workers, len(tables)), thread_name_prefix="status") as pool:
            read = list(pool.map(one, tables))
    else:
        read = [one(t) for t in tables]
    return [s for s in read if s is not None]


def _shown(inv: Invocation, table: Table, orderme_cache: dict[str, bool]) -> TableStatus | None:
    """The table's status; None for a folder that holds nothing but the waits of others on it."""
    shown = table_status(inv, table, orderme_cache)
    quiet = shown.health is Health.IDLE and shown.last_result is None and not shown.backlog_depth
    if (
        quiet
        and shown.lock is not None
        and shown.lock.generation == 0
        and not holds_more_than_waits(inv.store, table.prefix)
    ):
        return None
    return shown


def listed(inv: Invocation, prefix: str) -> Invocation:
    """The invocation reading through one listing of `prefix` (`ListedStore`), or itself when its
    store already is a listing that covers the prefix."""
    if isinstance(inv.store, ListedStore) and inv.store.covers(prefix):
        return inv
    view = ListedStore.of(inv.store, prefix)
    through = replace(inv, store=view)
    through.configs = inv.configs.reading_through(view, prefix)  # those above: once for all
    return through


def prefix_listing(inv: Invocation, prefix: str) -> Invocation:
    """The invocation reading every table under `prefix` through one listing of it; itself on a
    split store (a folder with no reserved segment is listed in its data bucket only)."""
    if isinstance(inv.store, PlacedStore):
        return inv
    parts = [p for p in prefix.split("/") if p]
    return listed(inv, f"{'/'.join(parts)}/" if parts else "")


def table_status(inv: Invocation, table: Table, orderme_cache: dict[str, bool] | None = None) -> TableStatus:
    """One listing of the table's state objects (`<table>/_`: its lock, `_BACKFILL` and claims,
    backlog, `_config/`, `_turnstile/` records) answers every stat and listing under it, and says
    which of them exist: only those are read (the lock, the head pointer, the result written last,
    the watermark...). Objects elsewhere (the dataset's and bucket's `_config/`, the gate, the
    ORDERME files of `incremental/` and `historical/`, a source's watermark) are asked for."""
    return _status(listed(inv, f"{table.prefix}/_"), table, orderme_cache)


def _status(inv: Invocation, table: Table, orderme_cache: dict[str, bool] | None) -> TableStatus:
    state = TableState(inv, table)
    errors: list[str] = []
    lock: Lock | None
    try:
        lock, lock_generation = state.lock, state.lock_generation
    except ConfigError as exc:
        lock, lock_generation = None, 0
        errors.append(str(exc))
    config_error = _config_error(inv, table)
    head = state.backlog(BACKLOG_CAP + 1)
    backfill = state.backfill
    if state.claim_error:
        errors.append(state.claim_error)
    subscriber = SubscriberView(state=state.subscriber.value, live=state.subscriber.live)
    if backfill is not None:
        claim = state.claim
        subscriber = SubscriberView(
            state=state.subscriber.value,
            live=state.subscriber.live,
            backfill_generation=backfill.generation,
            backfill_age_seconds=state.backfill_age,
            claim_owner=claim.owner if claim else None,
            claim_expires_at=claim.expires_at if claim else None,
        )
    gate = state.gate
    gate_present = state.gate_present
    ordered_by = _ordered_by(inv, table, orderme_cache if orderme_cache is not None else {})
    if head:
        ordered_by.append("backlog")
    if lock_generation:
        ordered_by.append("lock")  # only the subscriber of an ordered table writes one
    if state.derived is not None:
        ordered_by.append("derived")  # ordered by definition, before its first lock too
    view = lock_view(state, lock, lock_generation, audit_failed=publish_ops.offered(inv, table, lock))
    pause = state.operator_pause
    paused = lock is not None and (state.paused or pause is not None)
    result, result_error = last_result(inv.store, table)
    if result_error:
        errors.append(result_error)
    where = object_uri(inv.store, table.prefix)
    failed_batches = tuple(failed_view(where, f) for f in retry_ops.failures(inv, table, FAILED_SHOWN))
    waiting = [f for f in failed_batches if f.retry_at is None]
    running = open_jobs(inv, table, state.now, errors)
    health = _health(
        lock,
        errors,
        len(head),
        gate=gate_present,
        paused=paused,
        held=pause is not None,
        live=subscriber.live,
    )
    if running and health in (Health.PAUSED, Health.IDLE, Health.QUEUED, Health.STALLED):
        health = Health.RUNNING  # an unordered job runs, or its cancel is not settled yet
    requests = status_lineage.request_fields(inv, state, BACKLOG_CAP, errors)
    if (waiting or requests["stale_steps"]) and not health.is_problem:
        health = Health.FAILED  # failed batches wait for a retry, stale steps for a reprocess
    retrying = lock is not None and lock.retry_at is not None and lock.retry_at > state.now
    if retrying and health in (Health.RUNNING, Health.QUEUED, Health.STALLED):
        health = Health.RETRYING
    waits = status_lineage.waits(inv, state, lock, errors)
    if waits and health in (Health.QUEUED, Health.STALLED, Health.IDLE):
        health = Health.WAITING
    mark = status_lineage.watermark(inv, state, errors)
    health = _with_config_error(health, errors, config_error)
    return TableStatus(
        table=f"{table.dataset}.{table.table}",
        uri=where,
        health=health,
        ordered=bool(ordered_by),
        ordered_by=tuple(ordered_by),
        backlog_depth=min(len(head), BACKLOG_CAP),
        backlog_capped=len(head) > BACKLOG_CAP,
        backlog_head=head[0].rel if head else None,
        oldest_pending_age_seconds=oldest_pending_age(state, head[0] if head else None),
        last_commit_lag_seconds=_commit_lag(state, result),
        lock=view,
        subscriber=subscriber,
        gate=object_uri(inv.store, gate) if gate else None,
        gate_present=gate_present,
        last_applied=lock.position if lock else None,
        last_result=result,
        errors=tuple(errors),
        failed_batches=failed_batches,
        retrying=len(failed_batches) - len(waiting),
        **requests,
        watermark=mark,
        watermark_lag_seconds=state.age(mark),
        **status_lineage.gap_fields(inv, state, errors),
        waiting_for=waits,
        waiting_batches=status_lineage.queued_waits(inv, state, errors) if waits else {},
        paused=PauseView(pause.reason, pause.at, f"turnstile resume {where}") if pause else None,
        held=len(inv.store.list_entries(table.held, limit=BACKLOG_CAP)) if pause else 0,
        open_jobs=running,
    )


def _commit_lag(state: TableState, result: ResultView | None) -> float | None:
    if result is None or result.outcome in (BatchOutcome.FAILED.value, results.DROPPED_OUTCOME):
        return None
    return state.age(result.finished_at)


def _config_error(inv: Invocation, table: Table) -> str | None:
    """Why the config the function reads for the table's batches does not validate (a broken file
    stops them all); None when it does."""
    try:
        inv.configs.resolve(table.batch_folder(""))
    except ConfigError as exc:
        return str(exc)
    return None


def _with_config_error(health: Health, errors: list[str], error: str | None) -> Health:
    """A config error is shown, and is a problem, unless a failure already says more."""
    if error is None:
        return health
    errors.append(error)
    return health if health.is_problem else Health.UNREADABLE


def _health(
    lock: Lock | None,
    errors: list[str],
    backlog: int,
    *,
    gate: bool | None,
    paused: bool,
    held: bool,
    live: bool,
) -> Health:
    """`held`: an operator's pause, shown with nothing queued too (`paused`: also WAIT_FOR_VALIDATION)."""
    if lock is None or errors:
        return Health.UNREADABLE
    if lock.state is LockState.FAILED:
        return Health.BLOCKED
    if lock.state is LockState.RUNNING:
        return Health.RUNNING
    if held:
        return Health.PAUSED
    if not backlog:
        return Health.IDLE
    if gate is False:
        return Health.GATED
    if paused:
        return Health.PAUSED
    return Health.QUEUED if live else Health.STALLED


def _ordered_by(inv: Invocation, table: Table, cache: dict[str, bool]) -> list[str]:
    """Why the table counts as ordered: ORDER_PER_TABLE, or the ORDERME files on its cascade."""
    found = ["ORDER_PER_TABLE"] if inv.settings.order_per_table else []
    folders = [*levels(f"{table.prefix}/"), *(f"{table.prefix}/{kind}/" for kind in ORDERED_KINDS)]
    for folder in folders:
        name = f"{folder}{CONFIG}/{ORDERME}"
        if name not in cache:
            cache[name] = inv.store.stat(name) is not None
        if cache[name]:
            found.append(object_uri(inv.store, name))
    return found
