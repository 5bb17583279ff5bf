"""An operator's reprocess of a committed batch (`turnstile reprocess`), on the subscriber's side.

The request is an object `<table>/_turnstile/reprocess/<id>.json` (ids sort by the time they were
made). The subscriber takes the oldest one once every pointer queued before it was applied, holds
the lock for its job like for any batch (the request stands where a pointer would: it is removed,
at the generation covered, when the job committed the batch once more), and derives the job id
from the request's name and generation, so a duplicated event or a crash at any step attaches to
the same job instead of applying the batch twice.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime

from turnstile.config.cascade import ResolvedConfig
from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.paths import Table
from turnstile.protocol import covering, lineage, lock, results
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef
from turnstile.protocol.jobids import reprocess_job_id
from turnstile.protocol.manifests import manifest_batch, write_manifest
from turnstile.state.records import (
    CoveredBatch,
    Lock,
    LockState,
    Manifest,
    ReprocessRequest,
)
from turnstile.store.port import object_uri

log = logs.get("reprocess")


def folder(table: Table) -> str:
    """Folder of the table's reprocess requests, with trailing slash."""
    return f"{table.internal}reprocess/"


def request_name(table: Table, request_id: str) -> str:
    return f"{folder(table)}{request_id}.json"


def request_id_of(name: str) -> str:
    return name.rpartition("/")[2].removesuffix(".json")


def live_generation(inv: Invocation, success_name: str, resolved: ResolvedConfig) -> int | None:
    """The generation of the batch to apply once more: its `_SUCCESS`'s (None when gone), or a
    derived table's step's, which has no `_SUCCESS` (re-running a step after a source changed)."""
    if resolved.load.derived is not None:
        return lineage.STEP_GENERATION
    live = inv.store.stat(success_name)
    return None if live is None else live.generation


def new_request_id(now: datetime, success_name: str, attempt: int = 0) -> str:
    """Sorts by creation time; the tail (of the batch and the attempt) keeps two requests made in
    one microsecond apart without randomness, so a simulated schedule replays identically."""
    tail = hashlib.sha256(f"{success_name}\x1f{attempt}".encode()).hexdigest()[:8]
    return f"{now.strftime('%Y%m%dT%H%M%S%fZ')}-{tail}"


def result_name(table: Table, rel: str, success_generation: int, request_id: str) -> str:
    """Result record of a reprocess: next to the batch's own record, which it never replaces."""
    own = table.result(rel, success_generation)
    return f"{own.removesuffix('.json')}{results.REPROCESS}{request_id}.json"


def pending(inv: Invocation, table: Table) -> bool:
    return bool(inv.store.list_entries(folder(table), limit=1))


def due(inv: Invocation, table: Table, head: tuple[PointerRef, ...]) -> tuple[PointerRef | None, str | None]:
    """The oldest request when every pointer queued before it is applied (the backlog's head sorts
    after the request's `after`); else None, and the last pointer a job may cover before it runs
    (None: no limit)."""
    listed = inv.store.list_objects(folder(table), limit=1)
    if not listed:
        return None, None
    info = listed[0]
    ref = PointerRef(info.name, info.generation, "")
    if not head:
        return ref, None
    found = inv.store.read(info.name)
    if found is None or found.generation != info.generation:
        return None, None  # taken meanwhile: the next turn sees what changed
    after = _decode(inv, found.data, found.name).after
    if after is None or head[0].name > after:
        return ref, None
    return None, after


def _decode(inv: Invocation, data: bytes, name: str) -> ReprocessRequest:
    return ReprocessRequest.decode(data, object_uri(inv.store, name))


def acquire(
    inv: Invocation,
    table: Table,
    held: Lock,
    lock_generation: int,
    ref: PointerRef,
    *,
    fail: Callable[[CoveredBatch, str], None],
) -> tuple[Lock, int] | None:
    """Lock the table for the job that reprocesses the request `ref`; return the lock written and
    its generation (the caller submits), or None when another writer moved first or the request
    cannot be applied (then `fail` blocked the table on it)."""
    found = inv.store.read(ref.name)
    if found is None or found.generation != ref.generation:
        return None
    try:
        request = _decode(inv, found.data, found.name)
    except ConfigError as exc:
        at = CoveredBatch(rel="", pointer=ref.name, pointer_generation=ref.generation, success_generation=0)
        fail(at.model_copy(update={"reprocess": True}), f"{exc}; drop it with --skip-head")
        return None
    at = CoveredBatch(
        rel=request.rel,
        pointer=ref.name,
        pointer_generation=ref.generation,
        success_generation=request.success_generation,
        reprocess=True,
    )
    what = "rebuild" if request.cause is not None else "reprocess"
    try:
        batch, resolved = inv.batch(request.success)
        if resolved.load.derived is not None:  # a step reads its sources: as its first build, none
            lineage.check_sources(inv, table, resolved.load.lineage)  # through a cycle, say
    except (ConfigError, PathError) as exc:
        fail(at, f"{what} of {request.rel!r} waits, its request kept: {exc}")
        return None
    live = live_generation(inv, request.success, resolved)
    if live is None or live != request.success_generation:
        now = "is gone" if live is None else f"is generation {live} now"
        fail(
            at,
            f"reprocess of {request.rel!r}: its _SUCCESS {object_uri(inv.store, request.success)} {now}, "
            f"not the committed generation {request.success_generation} the request names; drop the "
            "request with --skip-head (the new generation is a batch of its own)",
        )
        return None
    request_id = request_id_of(ref.name)
    planned = manifest_batch(inv, batch, resolved, request.success_generation).model_copy(
        update={
            "reprocess": request_id,
            "rebuild": request.cause,
            "result": result_name(table, batch.rel, request.success_generation, request_id),
        }
    )
    job_id = covering.fresh_job_id(inv, table, ref, lock_generation, reprocess_job_id)
    manifest = Manifest(
        job_id=job_id,
        bucket=inv.store.bucket,
        batches=(planned,),
        done_signal=table.done_signal(job_id),
        ordered=True,  # its end wakes the subscriber, whatever the table
    )
    write_manifest(inv, table.manifest(job_id), manifest)
    running = Lock(
        state=LockState.RUNNING,
        job_id=job_id,
        covers=(at,),
        manifest=table.manifest(job_id),
        acquired_at=inv.clock.now(),
        backfill_generation=held.backfill_generation,
        history=held.history,
        position=held.position,
        attempt=held.attempt,
        last_error=held.last_error,
    )
    try:
        generation = lock.write(inv, table, running, lock_generation)
    except PreconditionFailed:
        return None  # another subscriber moved first; decide again from what it wrote
    why = "on an operator's request" if request.cause is None else f"after {request.cause.table} changed"
    log.warning(
        f"reprocessing committed batch {request.rel!r} of {table.uri} {why}",
        extra={
            "event": "reprocess_started",
            "table": table.prefix,
            "rel": request.rel,
            "job_id": job_id,
            "request": ref.name,
        },
    )
    return running, generation


def release_unordered(inv: Invocation, table: Table, held: Lock, lock_generation: int) -> bool:
    """After a reprocess on an unordered table, remove the lock it took (only a reprocess takes one
    there: left in place, it would make the table look ordered). False when the lock covered
    anything else, or the table is ordered."""
    if not held.covers or not all(c.reprocess for c in held.covers):
        return False
    success = f"{table.batch_folder(held.covers[0].rel)}{inv.settings.success_filename}"
    try:
        _, resolved = inv.batch(success)
    except (ConfigError, PathError):
        return False
    if resolved.ordered or inv.settings.order_per_table or held.position is not None:
        return False
    try:
        inv.store.delete(table.lock, if_generation=lock_generation)
    except PreconditionFailed:
        pass  # another subscriber moved first; it decides from what it wrote
    return True
