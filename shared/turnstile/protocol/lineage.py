"""Watermarks, dependencies and derived steps in the bucket: the reads and writes around the pure
rules of `protocol.dependencies`.

- After a job's commits the subscriber moves the table's watermark (compare-and-swap, forward
  only) and then wakes every table registered as its dependent (their `_BACKFILL`).
- A head that waits registers its table with each source, removes its own `_BACKFILL`, then looks
  at the sources once more: a source that moved meanwhile either sees no `_BACKFILL` and writes
  one, or was seen here (the publisher's two-sided handshake, docs/PROTOCOL.md).
- A derived table publishes its due steps as backlog pointers whenever it is woken with nothing
  queued, and the sweeper does the same for lost wake-ups and expired delays.
"""

from __future__ import annotations

from datetime import datetime

from turnstile.config.lineage_config import Lineage
from turnstile.config.load_config import LoadConfig
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.naturaltime import NaturalTime
from turnstile.names.paths import INTERNAL, Table
from turnstile.protocol import cycles, dependencies, gaps
from turnstile.protocol import lock as table_lock
from turnstile.protocol import watermarks as watermarks_store
from turnstile.protocol.context import Invocation
from turnstile.protocol.dependencies import Blocker, Unreadable
from turnstile.protocol.gaps import Present
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.protocol.watermarks import dependents_folder, read_watermark, table_at, watermarks
from turnstile.state.records import CoveredBatch, Dependent, Lock, Pointer, StepsPublished
from turnstile.store.port import ObjectInfo, ObjectStore, StoredObject, object_uri

log = logs.get("lineage")
MAX_CAS_ATTEMPTS = 20


def of_table(inv: Invocation, table: Table) -> Lineage:
    """The table's lineage keys (`configured`); ConfigError when a dependency can never be met
    (`check_sources`)."""
    lineage = configured(inv, table)
    check_sources(inv, table, lineage)
    return lineage


def configured(inv: Invocation, table: Table) -> Lineage:
    """The table's lineage keys, from the `_config/` levels at and above its folder (a rule across
    keys that a batch-level load.json completes, such as `merge_keys`, is not required here)."""
    return inv.configs.resolve(table.batch_folder(""), partial=True).load.lineage


def is_derived(inv: Invocation, table: Table) -> bool:
    """Whether the table is derived (ordered, though it has no lock before its first step)."""
    try:
        return configured(inv, table).derived
    except (ConfigError, PathError):
        return False


def check_sources(inv: Invocation, table: Table, lineage: Lineage) -> None:
    """A dependency on the table itself (a `depends_on` in a dataset's or the bucket's `_config/`
    applies to every table below it), on a table with objects but no natural time, or on one that
    has a natural time but is not ordered (neither has a watermark), or a dependency cycle, would
    hold the table for ever: ConfigError instead, on which the subscriber blocks the table with the
    alert. A source with no objects yet is waited for (it may be created later)."""
    for edge in lineage.depends_on:
        if edge.prefix == table.prefix:
            raise ConfigError(
                f"{table.uri}: depends_on names the table itself ({edge.prefix}), so its batches would "
                "wait for ever; a depends_on in a dataset's or the bucket's _config/load.json applies to "
                "every table below it: move it to the dependent tables' own _config/load.json"
            )
        try:
            source = inv.configs.resolve(f"{edge.prefix}/", partial=True)
        except ConfigError:
            continue  # its own batches report its config
        where = object_uri(inv.store, edge.prefix)
        if source.load.lineage.natural_time is None:
            if holds_more_than_waits(inv.store, edge.prefix):
                raise ConfigError(
                    f"{table.uri}: depends_on names {where}, which has no natural_time, so it has no "
                    'watermark and this table would wait for ever: set "natural_time" in its '
                    "_config/load.json, or remove the dependency"
                )
            continue
        ordered = source.ordered or inv.settings.order_per_table or source.load.derived is not None
        if ordered or inv.configs.orders_below(edge.prefix):
            continue
        if read_watermark(inv, table_at(inv, edge.prefix))[0] is None:  # one proves it is ordered
            raise ConfigError(
                f"{table.uri}: depends_on names {where}, which is not an ordered table (no ORDERME on "
                "its path), so it has no watermark and this table would wait for ever: put an ORDERME "
                "in its _config/, or remove the dependency"
            )
    if lineage.depends_on and (cycle := cycles.cycle_through(inv.configs, table.prefix)):
        raise ConfigError(f"{table.uri}: depends_on closes {cycles.describe(cycle)}")


def block_never_met(
    inv: Invocation, table: Table, held: Lock, generation: int, *, lineage: Lineage, error: str
) -> None:
    """A derived table whose dependency can never be met has no head batch to block on: its lock
    is failed at its next step (naming no pointer: `unlock` frees it and the check runs again)."""
    rel = dependencies.step_rel(_next_step_start(inv, table, lineage, held.position))
    at = CoveredBatch(rel=rel, pointer="", pointer_generation=0, success_generation=STEP_GENERATION)
    failed = table_lock.failed(
        table, held, None, at, error=error, now=inv.clock.now(), scheme=inv.store.scheme
    )
    table_lock.fail(inv, table, failed.model_copy(update={"covers": ()}), generation)


def steps_object(table: Table) -> str:
    """A derived table's record of the steps it has published."""
    return f"{table.internal}steps.json"


def holds_more_than_waits(store: ObjectStore, prefix: str) -> bool:
    """Whether the table folder holds objects of its own (batches, `_config/`), not only the records
    of the tables that wait for it (`_turnstile/dependents/`, written when they first waited: a
    source named before it exists, or a typo)."""
    if any(not f.endswith(f"/{INTERNAL}/") for f in store.list_folders(f"{prefix}/")):
        return True
    first = store.list_entries(f"{prefix}/", limit=1)
    return bool(first) and not first[0].name.startswith(f"{prefix}/{INTERNAL}/dependents/")


def dependent_object(source: Table, dependent_prefix: str) -> str:
    return f"{dependents_folder(source)}{dependent_prefix.replace('/', '~')}.json"


def batches_per_job(load: LoadConfig) -> int:
    """How many backlog batches one job covers: `max_batches_per_job`, for a derived table bounded
    by `maxstep`."""
    return dependencies.steps_per_job(load.lineage, load.max_batches_per_job)


def check_period(where: str, load: LoadConfig, rel: str) -> None:
    """A batch of a table with a natural time whose path names an impossible one cannot be
    ordered in time: the subscriber blocks the table on it (PathError), as on a bad path."""
    natural_time = load.lineage.natural_time
    if natural_time is None:
        return
    try:
        natural_time.start(rel)
    except ValueError as exc:
        raise PathError(
            f"{where}: {exc}; fix the folder name or natural_time in load.json, or drop the batch "
            "with unlock --skip-head"
        ) from exc


def head_blockers(
    inv: Invocation, lineage: Lineage, rels: tuple[str, ...], now: datetime
) -> tuple[tuple[Blocker, ...], int]:
    """What the first of `rels` waits for, and how many leading `rels` may start now (one job must
    not cover a batch that still waits). Reads each dependency's watermark once, and nothing when
    the table has neither dependencies nor a delay."""
    if not rels or lineage.natural_time is None or not lineage.gated:
        return (), len(rels)
    marks = watermarks(inv, lineage) if lineage.depends_on else {}
    # A head whose natural time cannot be read is let through: describing it blocks the table.
    first = tuple(
        b for b in dependencies.blockers(lineage, rels[0], marks, now) if not isinstance(b, Unreadable)
    )
    ready = 0
    for rel in rels:
        if dependencies.blockers(lineage, rel, marks, now):
            break
        ready += 1
    return first, ready


def after_commit(inv: Invocation, table: Table, rels: tuple[str, ...]) -> None:
    """Move the watermark past the committed `rels` and wake the dependents when it moved."""
    if not rels:
        return
    try:
        lineage = of_table(inv, table)
    except (ConfigError, PathError) as exc:  # the commits stand; the sweeper repairs the watermark
        log.warning(f"{table.uri}: watermark not moved: {exc}", extra={"table": table.prefix})
        return
    if lineage.natural_time is None:
        return
    if advance(inv, table, lineage, rels):
        wake_dependents(inv, table)


def after_declared(inv: Invocation, table: Table, rels: tuple[str, ...]) -> None:
    """Batches dropped by an operator (`turnstile skip`, `unlock --skip-head`) declare their periods
    empty: the watermark passes them as committed ones (the sweeper's repair also finds them)."""
    after_commit(inv, table, rels)


def advance(inv: Invocation, table: Table, lineage: Lineage, rels: tuple[str, ...]) -> bool:
    """Move the watermark past the committed `rels`, and past the batches the result records say
    were applied between the watermark's own batch and them (a subscriber that stopped between
    its commits and the watermark: one listing, empty as a rule); False when it did not move (or
    the table has no natural time)."""
    natural_time = lineage.natural_time
    if natural_time is None:
        return False
    found = [p for r in rels if (p := gaps.present(natural_time, r)) is not None]
    if not found:
        return False
    mark, _ = read_watermark(inv, table)
    start = watermarks_store.results_from(table, mark.rel if mark else None, past=True)
    end = watermarks_store.results_from(table, min(rels))
    found += watermarks_store.recorded_periods(inv, table, natural_time, start, end)
    return watermarks_store.advance(inv, table, lineage, found, rels[-1])


def declare(inv: Invocation, table: Table, lineage: Lineage, found: list[Present]) -> bool:
    """Periods declared with no batch to commit (a batch skipped, a period marked missing): the
    watermark passes them as if committed, and the dependents are woken when it moved."""
    moved = watermarks_store.advance(inv, table, lineage, found, None)
    if moved:
        wake_dependents(inv, table)
    return moved


def dependents(inv: Invocation, table: Table) -> list[str]:
    """The folders of the tables registered as waiting for this one."""
    return watermarks_store.registered(inv, table)


def wake_dependents(inv: Invocation, table: Table) -> None:
    """Start a subscriber run of every table registered as waiting for this one."""
    for prefix in dependents(inv, table):
        try:
            dependent = table_at(inv, prefix)
        except PathError as exc:
            log.warning(
                f"{object_uri(inv.store, dependent_object(table, prefix))}: not a dependent, ignored: {exc}"
            )
            continue
        ensure_subscriber(inv, dependent)


def register(inv: Invocation, table: Table, lineage: Lineage) -> None:
    """Record this table as a dependent of each of its sources (a create that exists already is
    fine: one write attempt per source)."""
    body = Dependent(table=table.prefix).encode()
    for edge in lineage.depends_on:
        try:
            inv.store.create(dependent_object(table_at(inv, edge.prefix), table.prefix), body)
        except PreconditionFailed:
            pass


def settle_waiting(inv: Invocation, table: Table, rel: str, backfill: ObjectInfo | None) -> None:
    """The head waits: register with the sources, remove `_BACKFILL`, then look once more; a wait
    that ended meanwhile starts a new run. The sweeper wakes the table when a delay expires."""
    lineage = of_table(inv, table)
    register(inv, table, lineage)
    if backfill is not None:
        try:
            inv.store.delete(table.backfill, if_generation=backfill.generation)
        except PreconditionFailed:
            return  # a newer _BACKFILL arrived: its own run looks again
    if not head_blockers(inv, lineage, (rel,), inv.clock.now())[0]:
        ensure_subscriber(inv, table)


def publish_due_steps(inv: Invocation, table: Table, lineage: Lineage, position: str | None) -> int:
    """A derived table: queue a pointer for each step the sources and the delay allow, after the
    last one published or applied (`steps.json`, the watermark, the lock's `position`: whichever
    is furthest, so a step applied is never queued again). Returns how many were queued."""
    if not lineage.derived or lineage.step is None or lineage.natural_time is None:
        return 0
    register(inv, table, lineage)
    found, frontier = _steps_frontier(inv, table, lineage.natural_time, position)
    starts = dependencies.due_steps(lineage, frontier, watermarks(inv, lineage), inv.clock.now())
    if not starts:
        return 0
    for start in starts:
        _queue_step(inv, table, dependencies.step_rel(start))
    through = StepsPublished(through=starts[-1] + lineage.step, updated_at=inv.clock.now())
    try:
        if found is None:
            inv.store.create(steps_object(table), through.encode())
        else:
            inv.store.replace(steps_object(table), through.encode(), if_generation=found.generation)
    except PreconditionFailed:
        pass  # another run published as far or further; a step queued twice is one pointer
    log.info(
        f"{table.uri}: {len(starts)} steps published",
        extra={"event": "steps_published", "table": table.prefix, "through": through.through.isoformat()},
    )
    return len(starts)


def _steps_frontier(
    inv: Invocation, table: Table, natural_time: NaturalTime, position: str | None
) -> tuple[StoredObject | None, datetime | None]:
    """`steps.json` as read, and the end of the last step published or applied (`steps.json`, the
    watermark, the lock's `position`: whichever is furthest, so a step applied is never queued
    again); None before the first step."""
    found = inv.store.read(steps_object(table))
    published = (
        None if found is None else StepsPublished.decode(found.data, object_uri(inv.store, found.name))
    )
    mark, _ = read_watermark(inv, table)
    applied = None if position is None else dependencies.period_end(natural_time, position)
    known = (published and published.through, mark and mark.watermark, applied)
    return found, max((t for t in known if t), default=None)


def next_step_blockers(
    inv: Invocation, table: Table, lineage: Lineage, position: str | None
) -> tuple[str, tuple[Blocker, ...]] | None:
    """A derived table with nothing queued: its next step's rel and what that step waits for (the
    sources' watermarks, the delay); None for other tables."""
    if not lineage.derived or lineage.step is None:
        return None
    start = _next_step_start(inv, table, lineage, position)
    end = start + lineage.step
    marks = watermarks(inv, lineage)
    return dependencies.step_rel(start), dependencies.period_blockers(lineage, end, marks, inv.clock.now())


def next_step_due(inv: Invocation, table: Table, lineage: Lineage, position: str | None) -> datetime | None:
    """A derived table: when its next step could have started at the earliest (its end plus the
    delay); None for other tables. How long ago that was is how long the table has waited."""
    if not lineage.derived or lineage.step is None:
        return None
    return _next_step_start(inv, table, lineage, position) + lineage.step + lineage.delay


def _next_step_start(inv: Invocation, table: Table, lineage: Lineage, position: str | None) -> datetime:
    """The start of a derived table's next step: after the last one published or applied."""
    if lineage.start is None or lineage.natural_time is None:
        raise ValueError(f"{table.uri} is not a derived table")
    _, frontier = _steps_frontier(inv, table, lineage.natural_time, position)
    return lineage.start if frontier is None else max(frontier, lineage.start)


STEP_GENERATION = 1  # a step has no `_SUCCESS` object: every publication of it is the same batch


def _queue_step(inv: Invocation, table: Table, rel: str) -> None:
    success = f"{table.batch_folder(rel)}{inv.settings.success_filename}"
    record = Pointer(success=success, success_generation=STEP_GENERATION, published_at=inv.clock.now())
    try:
        inv.store.create(table.pointer(rel, inv.settings.success_filename), record.encode())
    except PreconditionFailed:
        pass  # queued already


def repair(inv: Invocation, table: Table, position: str | None) -> bool:
    """The sweeper: a watermark behind the lock's position (a subscriber stopped between the commit
    and the watermark) moves up, and its dependents are woken. True when it moved."""
    if position is None:
        return False
    lineage = of_table(inv, table)
    natural_time = lineage.natural_time
    head = None if natural_time is None else gaps.present(natural_time, position)
    if natural_time is None or head is None:
        return False
    mark, _ = read_watermark(inv, table)
    before = watermarks_store.coverage(mark, natural_time)
    if mark is not None and mark.last is not None and gaps.add(before, natural_time.period, [head]) == before:
        return False  # nothing to repair (the common case: no listing)
    # The batches committed between the watermark's and the position (all of them with no
    # watermark yet: the first committed period is where the watermark starts).
    start = watermarks_store.results_from(table, None if mark is None else mark.rel)
    end = watermarks_store.results_from(table, position, past=True)
    found = [head, *watermarks_store.recorded_periods(inv, table, natural_time, start, end)]
    if not watermarks_store.advance(inv, table, lineage, found, position):
        return False
    wake_dependents(inv, table)
    return True
