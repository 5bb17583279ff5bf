"""Rebuilds of derived steps after a source period they read changed (docs/PROTOCOL.md, Rebuilds).

A source commits a period (a late batch let through, a reprocess, a re-upload, a period committed
after `gaps: "ignore"` moved past it) that a derived table's step has already been built from. The
subscriber that finishes the source's job, before it releases the source's lock, looks at every
registered dependent: each of its steps that read the period and is built (at or before the
dependent's `position`, covered by its running job, or committed perhaps by a job that ended
without recording it: an `unrecorded/` marker) gets a **rebuild**, a reprocess request of
the step made by the protocol with the change as its `cause`, or, for an `append` table (where a
step applied again would add its rows twice), a STALE record and the `derived_step_stale` alert.

The request's id is a function of the source change and the step (the source commit's recorded
time, then a hash of both): two handlers of one finish, or one redone after a crash, create the same
request (create-if-absent), and one created again after it was applied is skipped by the job,
whose commit key (`<rel>#1#reprocess-<id>`) the table has. A rebuild that commits is a change of
the derived table: its own dependents are rebuilt the same way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.paths import Table
from turnstile.protocol import dependencies, gaps, lineage, recovery, reprocess, watermarks
from turnstile.protocol import lock as lock_io
from turnstile.protocol.context import Invocation
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.state.records import (
    BatchResult,
    CoveredBatch,
    Lock,
    LockState,
    RebuildCause,
    ReprocessRequest,
    StaleStep,
)
from turnstile.store.port import object_uri

log = logs.get("rebuilds")
TAG = "-rebuild-"  # in a rebuild request's id, between its time and its hash
REPLACING_MODES = ("overwrite_partitions", "merge", "replace_window")  # a step's rows replaced


def request_id(cause: RebuildCause, dependent: str, step: str) -> str:
    """Sorts by the time of the source's commit (as operators' requests sort by theirs); the tail
    names the change and the step, so every handler of the change names the same request."""
    what = f"{dependent}\x1f{step}\x1f{cause.table}\x1f{cause.rel}\x1f{cause.success_generation}"
    tail = hashlib.sha256(f"{what}\x1f{cause.reprocess or ''}".encode()).hexdigest()[:16]
    return f"{cause.at.strftime('%Y%m%dT%H%M%S%fZ')}{TAG}{tail}"


def is_rebuild(request: str) -> bool:
    """Whether a reprocess request's id (or object name) is a rebuild's."""
    return TAG in request.rpartition("/")[2]


def requested_at(request: str) -> datetime | None:
    """The time a request's id begins with (a rebuild's: its source commit's)."""
    try:
        stamp = request.rpartition("/")[2].partition("-")[0]
        return datetime.strptime(stamp, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def stale_folder(table: Table) -> str:
    return f"{table.internal}stale/"


def stale_name(table: Table, rel: str, request: str) -> str:
    return f"{stale_folder(table)}{rel}/{request}.json"


def reprocess_command(inv: Invocation, table: Table, rel: str) -> str:
    return f"turnstile reprocess {object_uri(inv.store, table.batch_folder(rel).rstrip('/'))}"


@dataclass(frozen=True)
class _Change:
    """A committed period of the source: its batch and `[start, end)`."""

    covered: CoveredBatch
    start: datetime
    end: datetime


def queue(inv: Invocation, table: Table, held: Lock, applied: tuple[CoveredBatch, ...]) -> None:
    """The source `table`'s job (holding `held`) committed `applied`: queue the rebuilds (or STALE
    records) of the dependents' built steps that read them; clear the STALE records of a step of
    this table that was reprocessed. Called before the lock is released, so a crash leaves the
    finish, and this, to the next handler."""
    if not applied:
        return
    try:
        own = lineage.configured(inv, table)
    except (ConfigError, PathError):
        return  # its own batches report its config
    natural_time = own.natural_time
    if natural_time is None:
        return
    for covered in applied:
        if covered.reprocess and own.derived:
            _clear_stale(inv, table, covered.rel, held)
    changes = []
    for covered in applied:
        present = gaps.present(natural_time, covered.rel)
        if present is not None:
            changes.append(_Change(covered, present.start, present.start + natural_time.period))
    if not changes:
        return
    for prefix in lineage.dependents(inv, table):
        try:
            _for_dependent(inv, table, held, prefix, changes)
        except (ConfigError, PathError) as exc:  # the dependent reports its config itself
            log.warning(
                f"{object_uri(inv.store, prefix)}: not looked at for rebuilds after {table.uri} "
                f"committed: {exc}",
                extra={"table": table.prefix, "dependent": prefix},
            )


def _for_dependent(inv: Invocation, source: Table, held: Lock, prefix: str, changes: list[_Change]) -> None:
    dependent = watermarks.table_at(inv, prefix)
    steps = lineage.configured(inv, dependent)
    edge = next((e for e in steps.depends_on if e.prefix == source.prefix), None)
    if not steps.derived or edge is None:
        return  # a table of files: its batches are not built from the source's
    held_by, _ = lock_io.read(inv, dependent)
    if held_by.position is None:  # a lock rebuilt without it (deleted by hand): the history has it
        held_by = held_by.model_copy(update={"position": recovery.last_applied(inv, dependent)})
    queued = False
    for change in changes:
        for start in dependencies.steps_over(steps, change.start, change.end, edge.offset):
            rel = dependencies.step_rel(start)
            if not _built(inv, dependent, held_by, rel):
                continue  # its job reads the sources as they are now
            _, resolved = inv.batch(dependent.success(rel, inv.settings.success_filename))
            mode = resolved.load.mode
            if mode == "overwrite" and rel != held_by.position:
                continue  # the table holds its latest step only
            cause = _cause(inv, source, held, change.covered)
            request = request_id(cause, dependent.prefix, rel)
            if mode in (*REPLACING_MODES, "overwrite"):
                queued = _request(inv, dependent, rel, cause, request) or queued
            else:
                _mark_stale(inv, dependent, rel, cause, request)
    if queued:
        ensure_subscriber(inv, dependent)  # after the requests: an exiting subscriber looks last


def _built(inv: Invocation, dependent: Table, held: Lock, rel: str) -> bool:
    """The step was applied (at or before the position: steps are applied in order), is being
    built by the running job (which may have read the source before its commit), or was perhaps
    committed by a job that ended before recording it (its retry, after a backoff or a cancel, finds
    the commit and skips the step: it must be rebuilt as any built step)."""
    if held.position is not None and rel <= held.position:
        return True
    if held.state is LockState.RUNNING and any(c.rel == rel and not c.reprocess for c in held.covers):
        return True
    return inv.store.stat(unrecorded_name(dependent, rel)) is not None


def unrecorded_name(table: Table, rel: str) -> str:
    return f"{table.internal}unrecorded/{rel}.json"


def track_unrecorded(
    inv: Invocation, table: Table, applied: tuple[CoveredBatch, ...], unrecorded: CoveredBatch | None
) -> None:
    """At a job's finish, before the lock moves: mark the derived step the job ended without
    recording (it may be committed, and the lock no longer says so once it is retried or
    requeued); remove the marks of the steps it applied."""
    for covered in applied:
        if _is_step(covered):
            inv.store.remove(unrecorded_name(table, covered.rel))
    if unrecorded is not None and _is_step(unrecorded):
        inv.store.write(unrecorded_name(table, unrecorded.rel), unrecorded.model_dump_json().encode())


def _is_step(covered: CoveredBatch) -> bool:
    return covered.success_generation == lineage.STEP_GENERATION and not covered.reprocess


def _cause(inv: Invocation, source: Table, held: Lock, covered: CoveredBatch) -> RebuildCause:
    """The change, timed by the source commit's result record (the same for every handler)."""
    request = reprocess.request_id_of(covered.pointer) if covered.reprocess else None
    if request is None:
        name = source.result(covered.rel, covered.success_generation)
    else:
        name = reprocess.result_name(source, covered.rel, covered.success_generation, request)
    found = inv.store.read(name)
    at = None
    if found is not None:
        try:
            at = BatchResult.decode(found.data, object_uri(inv.store, name)).finished_at
        except ConfigError:
            at = None
    at = at or held.acquired_at
    if at is None:
        raise ConfigError(f"{object_uri(inv.store, name)} has no finish time and the lock no acquired_at")
    return RebuildCause(
        table=source.prefix,
        rel=covered.rel,
        success_generation=covered.success_generation,
        reprocess=request,
        at=at,
    )


def _request(inv: Invocation, dependent: Table, rel: str, cause: RebuildCause, request: str) -> bool:
    """Create the rebuild request unless it exists (a duplicate handler, a redone finish). True
    either way: the dependent's subscriber must look."""
    record = ReprocessRequest(
        success=dependent.success(rel, inv.settings.success_filename),
        success_generation=lineage.STEP_GENERATION,
        published_at=cause.at,
        rel=rel,
        requested_at=cause.at,
        reason=f"rebuild: {cause.table} {cause.rel} committed after the step was built",
        cause=cause,
    )
    try:
        inv.store.create(reprocess.request_name(dependent, request), record.encode())
    except PreconditionFailed:
        return True  # made already
    log.warning(
        f"{dependent.uri}: step {rel!r} is rebuilt: {cause.table} committed {cause.rel!r} after it was built",
        extra={
            "event": "rebuild_requested",
            "table": dependent.prefix,
            "rel": rel,
            "request_id": request,
            "source": cause.table,
            "source_rel": cause.rel,
        },
    )
    return True


def _mark_stale(inv: Invocation, dependent: Table, rel: str, cause: RebuildCause, request: str) -> None:
    """An `append` table: the step is recorded STALE and alerted on once (the first handler)."""
    record = StaleStep(rel=rel, cause=cause, at=inv.clock.now())
    try:
        inv.store.create(stale_name(dependent, rel, request), record.encode())
    except PreconditionFailed:
        return  # recorded (and alerted) already
    command = reprocess_command(inv, dependent, rel)
    log.error(
        f"{dependent.uri}: step {rel!r} is stale: {cause.table} committed {cause.rel!r} after "
        f"it was built, and mode append cannot replace a step's rows; delete the step's rows from the "
        f"table, then run: {command}",
        extra={
            "event": "derived_step_stale",
            "table": dependent.prefix,
            "bucket": inv.store.bucket,
            "rel": rel,
            "source": cause.table,
            "source_rel": cause.rel,
            "command": command,
        },
    )


def _clear_stale(inv: Invocation, table: Table, rel: str, held: Lock) -> None:
    """A reprocess of the step committed: the STALE records written before its job began are
    settled (a later one names a change its job may not have read)."""
    began = held.acquired_at
    for info in inv.store.list_objects(f"{stale_folder(table)}{rel}/"):
        found = inv.store.read(info.name)
        if found is None:
            continue
        try:
            stale = StaleStep.decode(found.data, object_uri(inv.store, info.name))
        except ConfigError:
            continue
        if began is None or stale.at <= began:
            try:
                inv.store.delete(info.name, if_generation=found.generation)
            except PreconditionFailed:
                pass


def stale_steps(inv: Invocation, table: Table, limit: int) -> list[StaleStep]:
    """The table's STALE steps (at most `limit`), oldest step first."""
    found = []
    for info in inv.store.list_objects(stale_folder(table), limit=limit):
        read = inv.store.read(info.name)
        if read is not None:
            found.append(StaleStep.decode(read.data, object_uri(inv.store, info.name)))
    return found
