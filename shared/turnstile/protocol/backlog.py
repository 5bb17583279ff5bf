"""A table's backlog: the pointers `<table>/_backlog/<rel>/_SUCCESS`, in the order they apply, and
the listings of the table's folders the subscriber makes before it locks.

Pointers are created by the publisher (`publisher.queue`); this module reads them, finds batches
upstream wrote whose events have not arrived, and removes pointers once their batch is applied,
each removal conditional on the pointer generation that was covered.
"""

from __future__ import annotations

from collections.abc import Callable

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.paths import ObjectKind, Table, classify
from turnstile.protocol import publisher, results
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef
from turnstile.state.records import APPLIED_OUTCOMES, BatchOutcome, BatchResult, CoveredBatch, Pointer
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject, object_uri

log = logs.get("backlog")
LOOKAHEAD = 100  # pointers listed per turn: the most one job may cover (max_batches_per_job <= 100)


def head(inv: Invocation, table: Table, limit: int) -> tuple[PointerRef, ...]:
    """The first `limit` pointers, in the order their batches apply."""
    success = inv.settings.success_filename
    return tuple(
        PointerRef(info.name, info.generation, table.rel_of_pointer(info.name, success))
        for info in inv.store.list_objects(table.backlog, limit=limit)
        if info.name.endswith("/" + success) or info.name == table.backlog + success
    )


def decode(inv: Invocation, found: StoredObject) -> Pointer:
    return Pointer.decode(found.data, object_uri(inv.store, found.name))


def read(inv: Invocation, ref: PointerRef) -> Pointer | None:
    """The pointer `ref` names, if it still holds the generation that was listed."""
    found = inv.store.read(ref.name)
    if found is None or found.generation != ref.generation:
        return None
    return decode(inv, found)


def live_generation(inv: Invocation, table: Table, rel: str) -> int | None:
    """The generation of the batch's `_SUCCESS` now: the one to apply (an event for an older one is
    stale, its data overwritten); None when upstream deleted it. One stat, only off the hot path
    (the subscriber takes the covered batches' generations from its listing)."""
    info = inv.store.stat(table.success(rel, inv.settings.success_filename))
    return None if info is None else info.generation


def success_generation(inv: Invocation, name: str) -> int | None:
    """The live generation of a listed `_SUCCESS` whose listing did not carry it (S3): one stat."""
    info = inv.store.stat(name)
    return None if info is None else info.generation


def covered(ref: PointerRef, success_generation: int) -> CoveredBatch:
    return CoveredBatch(
        rel=ref.rel,
        pointer=ref.name,
        pointer_generation=ref.generation,
        success_generation=success_generation,
    )


def already_applied(inv: Invocation, table: Table, ref: PointerRef) -> bool:
    """The batch's live `_SUCCESS` generation was committed (or found committed), by its result
    record, or upstream deleted it: nothing to apply. Read only when the pointer sorts at or before
    the position: a duplicate or stale event delivered after its batch was applied."""
    generation = live_generation(inv, table, ref.rel)
    if generation is None:
        return True
    record = recorded(inv, table, ref.rel, generation)
    return record is not None and (record.outcome in APPLIED or dropped(record))


def recorded_applied(inv: Invocation, table: Table, rel: str, success_generation: int) -> bool:
    """The result record of this `_SUCCESS` generation says it is committed."""
    return recorded_outcome(inv, table, rel, success_generation) in APPLIED


APPLIED = APPLIED_OUTCOMES


def recorded_outcome(inv: Invocation, table: Table, rel: str, success_generation: int) -> BatchOutcome | None:
    """What the result record of this `_SUCCESS` generation says; None without a readable one."""
    record = recorded(inv, table, rel, success_generation)
    return None if record is None else record.outcome


def recorded(inv: Invocation, table: Table, rel: str, success_generation: int) -> BatchResult | None:
    """The result record of this `_SUCCESS` generation; None without a readable one."""
    result = inv.store.read(table.result(rel, success_generation))
    if result is None:
        return None
    try:
        return BatchResult.decode(result.data, result.name)
    except ConfigError:
        return None


def dropped(record: BatchResult) -> bool:
    """The record says an operator dropped the batch (`turnstile skip`, `unlock --skip-head`)."""
    return record.outcome is BatchOutcome.FAILED and (record.error or "").startswith(results.DROPPED)


def earlier_commit(inv: Invocation, table: Table, rel: str) -> BatchResult | None:
    """The newest result record of the batch, of any `_SUCCESS` generation, saying it was applied."""
    applied = []
    for info in inv.store.list_entries(f"{table.internal}results/{rel}/"):
        name = results.read_name(table, info.name)
        found = inv.store.read(info.name) if name and name.rel == rel and not name.request else None
        try:
            record = BatchResult.decode(found.data, found.name) if found is not None else None
        except ConfigError:
            continue
        if record is not None and record.outcome in APPLIED:
            applied.append(record)
    return max(applied, key=lambda r: r.success_generation, default=None)


def late_error(inv: Invocation, table: Table, position: str | None, rel: str, generation: int) -> str:
    """Why a late batch blocks the table, and what to do. A batch applied before (an upstream
    that uploads it again) is most likely a duplicate: unlock alone would apply it twice."""
    unlock = f"turnstile unlock {object_uri(inv.store, table.prefix)}"
    before = earlier_commit(inv, table, rel)
    if before is None:
        return (
            f"batch {rel!r} arrived after {position!r} had been applied; applying it now would break "
            f"the table's order. To apply it now anyway: {unlock}; to drop it: add --skip-head"
        )
    when = f" at {before.finished_at.isoformat()}" if before.finished_at else ""
    snapshot = f" (snapshot {before.snapshot_id})" if before.snapshot_id is not None else ""
    return (
        f"batch {rel!r} was uploaded again (_SUCCESS generation {generation}) after {position!r} had "
        f"been applied; it was already applied: generation {before.success_generation} committed"
        f"{when}{snapshot}. If this is a duplicate upload, drop it: {unlock} --skip-head; if its data "
        f"changed and must be applied again, out of order (an append table then holds both uploads' "
        f"rows): {unlock}"
    )


def drop(inv: Invocation, table: Table, ref: PointerRef) -> None:
    """Remove the pointer of a batch already applied (a duplicate event delivered late)."""
    try:
        inv.store.delete(ref.name, if_generation=ref.generation)
    except PreconditionFailed:
        return
    log.info(
        "dropped the pointer of a batch already applied or deleted upstream",
        extra={"table": table.prefix, "rel": ref.rel},
    )


def remove_applied(inv: Invocation, applied: tuple[CoveredBatch, ...]) -> None:
    """Remove the pointers of applied batches, each only at the generation the job covered."""
    for batch in applied:
        try:
            inv.store.delete(batch.pointer, if_generation=batch.pointer_generation)
        except PreconditionFailed:
            pass  # gone already (a repeated finish) or re-published with a new generation: keep that


def pending_objects(
    inv: Invocation, table: Table, position: str | None, first_rel: str, last_rel: str
) -> list[ListedObject]:
    """Every object from just past the last applied batch to the end of the last covered one,
    skipping the reserved `_` folders: the covered batches' files, and the `_SUCCESS` of any batch
    upstream wrote in between whose event has not arrived yet. One or two listings, and no request
    per object: generations only where the store's listing carries them (not on S3)."""
    prefix = f"{table.prefix}/"
    after_position = prefix if position is None else _past(table.batch_folder(position))
    start = min(after_position, table.batch_folder(first_rel))  # an operator may let a late head through
    return [
        entry
        for low, high in _unreserved(table, start, _past(table.batch_folder(last_rel)))
        for entry in inv.store.list_entries(prefix, start_offset=low, end_offset=high)
    ]


def batch_objects(
    inv: Invocation,
    table: Table,
    start: str,
    end: str | None = None,
    only: Callable[[str], bool] | None = None,
) -> list[ObjectInfo]:
    """The table's objects with names in [start, end) accepted by `only`, with their generations,
    skipping the reserved folders (those whose first segment starts with `_`): one or two listings
    (and on S3 a HEAD per object kept)."""
    return [
        info
        for low, high in _unreserved(table, start, end)
        for info in inv.store.list_objects(f"{table.prefix}/", start_offset=low, end_offset=high, only=only)
    ]


def _unreserved(table: Table, start: str, end: str | None) -> list[tuple[str, str]]:
    """The name ranges [low, high) of [start, end) in the table's folder outside its reserved `_`
    folders (`end` None: to the end of the folder)."""
    prefix = f"{table.prefix}/"
    reserved_start, reserved_end = prefix + "_", prefix + "`"  # "`" follows "_"
    end = _past(prefix) if end is None else end
    ranges = ((start, min(end, reserved_start)), (max(start, reserved_end), end))
    return [(low, high) for low, high in ranges if low < high]


def dropped_by_operator(inv: Invocation, table: Table, first: str, last: str) -> set[tuple[str, int]]:
    """(rel, `_SUCCESS` generation) of the batches from `first` to `last` an operator dropped
    (`turnstile skip`, `unlock --skip-head`): a copy of their `_SUCCESS` event delivered late
    queues them again, and they must not be applied. One listing of the range's result records; a
    record is read only when there is one (a batch failed, or dropped), not on the way of a batch."""
    root = f"{table.internal}results/"
    start = f"{root}{first}/" if first else root
    end = _past(f"{root}{last}/") if last else None
    found = set()
    for info in inv.store.list_entries(root, start_offset=start, end_offset=end):
        name = results.read_name(table, info.name)
        read = inv.store.read(info.name) if name is not None and not name.request else None
        if name is None or read is None:
            continue
        try:
            if dropped(BatchResult.decode(read.data, read.name)):
                found.add((name.rel, name.generation))
        except ConfigError:
            continue
    return found


def _past(folder: str) -> str:
    """The first name after everything in `folder` ("a/b/" -> "a/b0": "0" follows "/")."""
    return folder[:-1] + "0"


def unannounced(
    inv: Invocation, table: Table, listing: list[ListedObject], queued: set[str], position: str | None = None
) -> list[str]:
    """Names of the ordered `_SUCCESS` objects of this table in a listing whose rel is not among
    `queued`: batches upstream wrote whose events have not arrived yet. Batches at or before the
    position are applied (a late head let through lists them too): never queued again."""
    settings = inv.settings
    applied_up_to = None if position is None else table.pointer(position, settings.success_filename)
    found = []
    for info in listing:
        if (
            classify(info.name, settings.success_filename, settings.start_backfill_filename)
            is not ObjectKind.SUCCESS
        ):
            continue
        try:
            batch, resolved = inv.batch(info.name)
        except (ConfigError, PathError):
            continue  # its own event reports the problem
        ordered = resolved.ordered or settings.order_per_table
        if batch.table.prefix != table.prefix or not ordered or batch.rel in queued:
            continue
        if applied_up_to is not None and batch.pointer(settings.success_filename) <= applied_up_to:
            continue
        # Its result record: applied (no position after a `_bqlock` deleted by hand, or a new
        # table), or failed and its pointer removed since: an operator dropped it (the original's
        # way to skip a batch applied by hand); its `_SUCCESS` uploaded again applies it.
        generation = info.generation if info.generation is not None else success_generation(inv, info.name)
        if generation is None:
            continue  # deleted since listed
        outcome = recorded_outcome(inv, table, batch.rel, generation)
        if outcome is BatchOutcome.FAILED:
            log.warning(
                f"{object_uri(inv.store, info.name)} failed and its backlog pointer was removed: it is "
                "not applied (upload its _SUCCESS again to apply it)",
                extra={"event": "batch_dropped", "table": table.prefix, "rel": batch.rel},
            )
            continue
        if applied_up_to is None and outcome in APPLIED:
            continue
        found.append(info.name)
    return found


def queue_unannounced(inv: Invocation, successes: list[str]) -> None:
    """Queue batches whose events have not arrived (when their events do arrive, the pointer is
    already there and the publisher does nothing)."""
    for name in successes:
        info = inv.store.stat(name)
        if info is None:
            continue
        batch, _ = inv.batch(name)
        publisher.queue(inv, batch, info.generation)
        log.warning(
            f"queued {object_uri(inv.store, name)}, whose event has not arrived"
            + skip_hint(inv, batch.folder),
            extra={"event": "batch_requeued", "table": batch.table.prefix, "rel": batch.rel},
        )


def skip_hint(inv: Invocation, folder: str) -> str:
    """A pointer deleted by hand looks like a lost event and is queued again: say how to skip."""
    return (
        "; if its backlog pointer was deleted to skip it, it is applied all the same: skip a batch "
        f"with turnstile skip {object_uri(inv.store, folder)}"
    )


def furthest(inv: Invocation, table: Table, *rels: str | None) -> str | None:
    """The rel whose pointer sorts last: the position after applying `rels` in this order."""
    known = [rel for rel in rels if rel is not None]
    success = inv.settings.success_filename
    return max(known, key=lambda rel: table.pointer(rel, success)) if known else None
