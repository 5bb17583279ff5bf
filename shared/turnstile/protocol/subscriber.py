"""The backlog subscriber: holds a table through its lock and applies the backlog in order.

Each turn reads the lock and the backlog head, asks `decide` for the next step and performs it
with a generation precondition taken from what it read; a lost race just means deciding again.
It never waits for a running job: the job's done signal (or the sweeper) wakes it.
"""

from __future__ import annotations

from datetime import datetime

from turnstile import logs
from turnstile.errors import ConfigError, JobError, PathError, PreconditionFailed
from turnstile.jobs.port import JobState, JobStatus
from turnstile.paths import ObjectKind, Table, classify
from turnstile.protocol import publisher
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import (
    Acquire,
    Blocked,
    Drop,
    Finish,
    Gated,
    Idle,
    Late,
    Paused,
    PointerRef,
    Submit,
    View,
    Wait,
    decide,
)
from turnstile.protocol.jobids import ordered_job_id
from turnstile.protocol.manifests import manifest_batch, write_manifest
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.records import (
    BatchOutcome,
    BatchResult,
    CoveredBatch,
    JobDone,
    Lock,
    LockState,
    Manifest,
    ManifestBatch,
    Pointer,
    new_nonce,
    wake_body,
)
from turnstile.store.port import ObjectInfo, StoredObject, object_uri

log = logs.get("subscriber")
HISTORY = 5
LOOKAHEAD = 100  # pointers listed per turn: the most one job may cover (max_batches_per_job <= 100)
MAX_TURNS = 1000  # a turn always changes state or returns; this only guards against a bug looping


def unlock_command(table: Table, scheme: str = "gs") -> str:
    return f"turnstile unlock {scheme}://{table.bucket}/{table.prefix} [--skip-head]"


def read_lock(inv: Invocation, table: Table) -> tuple[Lock, int]:
    """The lock and its generation; an absent lock is FREE at generation 0."""
    found = inv.store.read(table.lock)
    if found is None:
        return Lock(), 0
    return Lock.decode(found.data, f"gs://{inv.store.bucket}/{table.lock}"), found.generation


def write_lock(inv: Invocation, table: Table, lock: Lock, generation: int) -> int:
    """Compare-and-swap the lock from the generation read (0: it must still be absent)."""
    data = lock.model_copy(update={"updated_at": inv.clock.now(), "nonce": new_nonce()}).encode()
    if generation == 0:
        return inv.store.create(table.lock, data)
    return inv.store.replace(table.lock, data, if_generation=generation)


def backlog_head(inv: Invocation, table: Table, limit: int) -> tuple[PointerRef, ...]:
    success = inv.settings.success_filename
    return tuple(
        PointerRef(info.name, info.generation, table.rel_of_pointer(info.name, success))
        for info in inv.store.list_objects(table.backlog, limit=limit)
        if info.name.endswith("/" + success) or info.name == table.backlog + success
    )


def run(inv: Invocation, table: Table) -> str:
    """Drive the table until there is nothing to do now; return what it stopped on."""
    for _ in range(MAX_TURNS):
        if inv.time_left() <= 0:
            inv.store.write(table.backfill, wake_body())  # a new generation: a fresh run continues
            log.info("handing over before the function timeout", extra={"table": table.prefix})
            return "handover"
        lock, lock_generation = read_lock(inv, table)
        action = decide(_view(inv, table, lock))
        match action:
            case Blocked():
                _log_blocked(inv, table, lock)
                return "blocked"
            case Gated():
                return "gated"
            case Paused():
                return "paused"
            case Wait(job_id=job_id):
                log.info("job running", extra={"table": table.prefix, "job_id": job_id})
                return "waiting"
            case Idle():
                _exit_if_empty(inv, table)
                return "idle"
            case Submit(job_id=job_id):
                _submit(inv, table, lock, lock_generation, job_id)
            case Drop(head=head):
                _drop(inv, table, head)
            case Late(head=head):
                _block_late(inv, table, lock, lock_generation, head)
            case Acquire(covers=covers):
                _acquire(inv, table, lock, lock_generation, covers)
            case Finish():
                _finish(inv, table, lock, lock_generation, action)
                if inv.settings.wait_for_validation and action.failed is None:
                    return "paused"
    raise RuntimeError(f"{table.uri}: the subscriber made {MAX_TURNS} turns without settling")


def _view(inv: Invocation, table: Table, lock: Lock) -> View:
    if lock.state is LockState.RUNNING and lock.job_id:
        # The job's done signal is its end: the runner may still call it RUNNING for a while
        # (the driver stopping, Dataproc tearing down), and nothing else would wake us then.
        done = inv.store.read(table.done_signal(lock.job_id))
        if done is not None:
            signal = JobDone.decode(done.data, done.name)
            state = JobState.SUCCEEDED if signal.succeeded else JobState.FAILED
            job: JobStatus | None = JobStatus(lock.job_id, state, signal.error)
            return View(lock=lock, head=(), job=job, outcomes=dict(signal.outcomes))
        job = inv.runner.status(lock.job_id)
        outcomes = _results(inv, table, lock) if job is not None and job.state.finished else None
        return View(lock=lock, head=(), job=job, outcomes=outcomes)
    if lock.state is LockState.FAILED:
        return View(lock=lock, head=())
    gate = inv.settings.start_backfill_filename
    if gate and inv.store.stat(table.gate(gate)) is None:
        return View(lock=lock, head=(), gate_open=False)
    head = backlog_head(inv, table, LOOKAHEAD)
    may_start = True
    if inv.settings.wait_for_validation and head:
        # One job per _BACKFILL generation: the one that started the last job cannot start another.
        current = inv.store.stat(table.backfill)
        may_start = current is not None and current.generation != lock.backfill_generation
    # Strictly before: a new `_SUCCESS` generation of the last batch applied (a re-upload, or every
    # batch of a flat `<ds>/<tbl>/_SUCCESS` table) is the next batch, not a late one; a copy of the
    # same generation is skipped by the job as already committed.
    position = None if lock.position is None else table.pointer(lock.position, inv.settings.success_filename)
    behind = (
        bool(head) and position is not None and head[0].name <= position and head[0].name != lock.allow_late
    )
    # Strictly before: a new `_SUCCESS` generation of the last batch applied (a re-upload, or every
    # batch of a flat `<ds>/<tbl>/_SUCCESS` table) is the next batch, not a late one.
    late = behind and position is not None and head[0].name < position
    applied = behind and _already_applied(inv, table, head[0])
    return View(lock=lock, head=head, may_start=may_start, head_is_late=late, head_applied=applied)


def _pointer(inv: Invocation, found: StoredObject) -> Pointer:
    return Pointer.decode(found.data, f"gs://{inv.store.bucket}/{found.name}")


def _results(inv: Invocation, table: Table, lock: Lock) -> dict[str, BatchOutcome]:
    """How each covered batch of a job that ended without its done signal (it crashed) ended:
    from the per-batch result records it wrote before."""
    outcomes = {}
    for covered in lock.covers:
        found = inv.store.read(table.result(covered.rel, covered.success_generation))
        if found is not None:
            outcomes[covered.rel] = BatchResult.decode(found.data, found.name).outcome
    return outcomes


def _acquire(
    inv: Invocation,
    table: Table,
    lock: Lock,
    lock_generation: int,
    covers: tuple[PointerRef, ...],
) -> None:
    pointers: list[tuple[PointerRef, Pointer]] = []
    limit = len(covers)
    for pointer in covers[:limit]:
        if len(pointers) >= limit:
            break
        found = inv.store.read(pointer.name)
        if found is None or found.generation != pointer.generation:
            break  # changed since listed: cover what is certain, the next turn sees the rest
        record = _pointer(inv, found)
        if not pointers:  # the head's config says how many batches one job may cover
            try:
                _, resolved = inv.batch(record.success)
            except (ConfigError, PathError) as exc:
                _block(inv, table, lock, lock_generation, _covered(pointer, record), error=str(exc))
                return
            limit = 1 if inv.settings.wait_for_validation else resolved.load.max_batches_per_job
        pointers.append((pointer, record))
    if not pointers:
        return
    listing = _pending_objects(inv, table, lock.position, pointers[0][0].rel, pointers[-1][0].rel)
    covered_rels = {pointer.rel for pointer, _ in pointers}
    late = [name for name, rel in _ordered_successes(inv, table, listing) if rel not in covered_rels]
    if late:  # upstream wrote these before the batches about to be covered: queue them first
        _publish_late_events(inv, late)
        return
    batches: list[ManifestBatch] = []
    for pointer, record in pointers:
        folder = table.batch_folder(pointer.rel)
        files = tuple(object_uri(inv.store, o.name) for o in listing if _directly_in(folder, o.name))
        try:
            batches.append(manifest_batch(inv, record.success, record.success_generation, data_uris=files))
        except (ConfigError, PathError) as exc:
            if not batches:
                _block(inv, table, lock, lock_generation, _covered(pointer, record), error=str(exc))
                return
            break
    covered = tuple(_covered(pointer, record) for pointer, record in pointers[: len(batches)])
    job_id = ordered_job_id(
        inv.settings.job_prefix, table, covers[0].name, covers[0].generation, lock_generation
    )
    manifest = Manifest(
        job_id=job_id,
        bucket=inv.store.bucket,
        batches=tuple(batches),
        done_signal=table.done_signal(job_id),
        ordered=True,
    )
    write_manifest(inv, table.manifest(job_id), manifest)
    held = Lock(
        state=LockState.RUNNING,
        job_id=job_id,
        covers=covered,
        manifest=table.manifest(job_id),
        acquired_at=inv.clock.now(),
        backfill_generation=_authorizing_backfill(inv, table, lock),
        history=lock.history,
        position=lock.position,  # kept while held: a job that applies nothing must not reset it
    )
    try:
        generation = write_lock(inv, table, held, lock_generation)
    except PreconditionFailed:
        return  # another subscriber moved first; decide again from what it wrote
    log.info(
        "locked table for job",
        extra={
            "table": table.prefix,
            "job_id": job_id,
            "rels": [c.rel for c in covered],
            "lock_generation": generation,
        },
    )
    _submit(inv, table, held, generation, job_id)


def _covered(pointer: PointerRef, record: Pointer) -> CoveredBatch:
    return CoveredBatch(
        rel=pointer.rel,
        pointer=pointer.name,
        pointer_generation=pointer.generation,
        success_generation=record.success_generation,
    )


def _block(
    inv: Invocation, table: Table, lock: Lock, lock_generation: int, at: CoveredBatch, *, error: str
) -> None:
    """Fail the lock on a batch that cannot even be described (bad path or config)."""
    failed = _failed_lock(table, lock, None, at, error=error, now=inv.clock.now(), scheme=inv.store.scheme)
    try:
        write_lock(inv, table, failed, lock_generation)
    except PreconditionFailed:
        return
    _log_failure(table, failed)


def _directly_in(folder: str, name: str) -> bool:
    rest = name[len(folder) :] if name.startswith(folder) else "/"
    return "/" not in rest and not rest.startswith(("_", "."))


def _pending_objects(
    inv: Invocation, table: Table, position: str | None, first_rel: str, last_rel: str
) -> list[ObjectInfo]:
    """Every object from just past the last applied batch to the end of the last covered one,
    skipping the reserved `_` folders: the covered batches' files, and the `_SUCCESS` of any batch
    upstream wrote in between whose event has not arrived yet. One or two listings."""
    prefix = f"{table.prefix}/"
    after_position = prefix if position is None else _past(table.batch_folder(position))
    start = min(after_position, table.batch_folder(first_rel))  # an operator may let a late head through
    end = _past(table.batch_folder(last_rel))
    reserved_start, reserved_end = prefix + "_", prefix + "`"  # names whose first segment starts with "_"
    found: list[ObjectInfo] = []
    for low, high in ((start, min(end, reserved_start)), (max(start, reserved_end), end)):
        if low < high:
            found.extend(inv.store.list_objects(prefix, start_offset=low, end_offset=high))
    return found


def _past(folder: str) -> str:
    """The first name after everything in `folder` ("a/b/" -> "a/b0": "0" follows "/")."""
    return folder[:-1] + "0"


def _ordered_successes(inv: Invocation, table: Table, listing: list[ObjectInfo]) -> list[tuple[str, str]]:
    """(name, rel) of the ordered `_SUCCESS` objects of this table in a listing."""
    settings = inv.settings
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
        if batch.table.prefix == table.prefix and (resolved.ordered or settings.order_per_table):
            found.append((info.name, batch.rel))
    return found


def _publish_late_events(inv: Invocation, successes: list[str]) -> None:
    """Queue batches whose events have not arrived (when their events do arrive, the pointer is
    already there and the publisher does nothing)."""
    for name in successes:
        info = inv.store.stat(name)
        if info is None:
            continue
        batch, _ = inv.batch(name)
        publisher.queue(inv, batch, info.generation)


def _block_late(inv: Invocation, table: Table, lock: Lock, lock_generation: int, head: PointerRef) -> None:
    found = inv.store.read(head.name)
    if found is None or found.generation != head.generation:
        return  # changed since listed: decide again
    pointer = _pointer(inv, found)
    covered = CoveredBatch(
        rel=head.rel,
        pointer=head.name,
        pointer_generation=head.generation,
        success_generation=pointer.success_generation,
    )
    error = (
        f"batch {head.rel!r} arrived after {lock.position!r} had been applied; applying it now would break "
        "the table's order. To apply it now anyway: turnstile unlock "
        + object_uri(inv.store, table.prefix)
        + "; to drop it: add --skip-head"
    )
    failed = _failed_lock(
        table, lock, None, covered, error=error, now=inv.clock.now(), scheme=inv.store.scheme
    )
    try:
        write_lock(inv, table, failed, lock_generation)
    except PreconditionFailed:
        return
    _log_failure(table, failed)


def _already_applied(inv: Invocation, table: Table, head: PointerRef) -> bool:
    """The head's result record says its very `_SUCCESS` generation was committed (or found
    committed). Read only when the head sorts at or before the position: the duplicate case."""
    found = inv.store.read(head.name)
    if found is None:
        return False
    generation = _pointer(inv, found).success_generation
    result = inv.store.read(table.result(head.rel, generation))
    if result is None:
        return False
    try:
        outcome = BatchResult.decode(result.data, result.name).outcome
    except ConfigError:
        return False
    return outcome in (BatchOutcome.COMMITTED, BatchOutcome.SKIPPED)


def _drop(inv: Invocation, table: Table, head: PointerRef) -> None:
    try:
        inv.store.delete(head.name, if_generation=head.generation)
    except PreconditionFailed:
        return
    log.info("dropped the pointer of a batch already applied", extra={"table": table.prefix, "rel": head.rel})


def _authorizing_backfill(inv: Invocation, table: Table, lock: Lock) -> int | None:
    """Under WAIT_FOR_VALIDATION, the `_BACKFILL` generation this job used up."""
    if not inv.settings.wait_for_validation:
        return lock.backfill_generation
    current = inv.store.stat(table.backfill)
    return None if current is None else current.generation


def _submit(inv: Invocation, table: Table, lock: Lock, lock_generation: int, job_id: str) -> None:
    assert lock.manifest is not None
    try:
        inv.runner.submit(job_id, object_uri(inv.store, lock.manifest))
    except JobError as exc:
        failed = _failed_lock(
            table,
            lock,
            job_id,
            lock.covers[0],
            error=f"the job could not be submitted: {exc}",
            now=inv.clock.now(),
            scheme=inv.store.scheme,
        )
        try:
            write_lock(inv, table, failed, lock_generation)
        except PreconditionFailed:
            return
        _log_failure(table, failed)


def _finish(inv: Invocation, table: Table, lock: Lock, lock_generation: int, finish: Finish) -> None:
    for covered in finish.applied:
        try:
            inv.store.delete(covered.pointer, if_generation=covered.pointer_generation)
        except PreconditionFailed:
            pass  # gone already (a repeated finish) or re-published with a new generation: keep that
    history = (*lock.history, lock.job_id or "")[-HISTORY:]
    now = inv.clock.now()
    # A late batch an operator let through sorts before the position: it must not move it back.
    position = _furthest(inv, table, lock.position, *(c.rel for c in finish.applied))
    if finish.failed is None:
        released = Lock(
            state=LockState.FREE,
            history=history,
            # WAIT_FOR_VALIDATION: a _BACKFILL written before the job ended (the sweeper waking
            # the subscriber) is used up here; only one written after it is a go-ahead.
            backfill_generation=_authorizing_backfill(inv, table, lock),
            position=position,
        )
        try:
            write_lock(inv, table, released, lock_generation)
        except PreconditionFailed:
            return
        log.info(
            "job applied",
            extra={"table": table.prefix, "job_id": lock.job_id, "rels": [c.rel for c in finish.applied]},
        )
        return
    failed = _failed_lock(
        table,
        lock,
        lock.job_id,
        finish.failed,
        error=finish.error or "job failed",
        now=now,
        scheme=inv.store.scheme,
    )
    failed = failed.model_copy(
        update={
            "history": history,
            "position": position,
        }
    )
    try:
        write_lock(inv, table, failed, lock_generation)
    except PreconditionFailed:
        return
    _log_failure(table, failed)


def _furthest(inv: Invocation, table: Table, *rels: str | None) -> str | None:
    """The rel whose pointer sorts last: the position after applying `rels` in this order."""
    known = [rel for rel in rels if rel is not None]
    success = inv.settings.success_filename
    return max(known, key=lambda rel: table.pointer(rel, success)) if known else None


def _failed_lock(
    table: Table, lock: Lock, job_id: str | None, at: CoveredBatch, *, error: str, now: datetime, scheme: str
) -> Lock:
    return Lock(
        state=LockState.FAILED,
        job_id=job_id,
        covers=(at,),
        manifest=lock.manifest,
        acquired_at=lock.acquired_at or now,
        error=error,
        failed_rel=at.rel,
        unlock_command=unlock_command(table, scheme),
        history=lock.history,
        backfill_generation=lock.backfill_generation,
        position=lock.position,
    )


def _log_failure(table: Table, lock: Lock) -> None:
    log.error(
        f"batch {lock.failed_rel!r} of {table.uri} failed; the table is blocked. Fix the cause, then run: "
        f"{lock.unlock_command}",
        extra={
            "event": "table_blocked",
            "table": table.prefix,
            "bucket": table.bucket,
            "job_id": lock.job_id,
            "rel": lock.failed_rel,
            "error": lock.error,
            "unlock_command": lock.unlock_command,
        },
    )


def _log_blocked(inv: Invocation, table: Table, lock: Lock) -> None:
    age = (inv.clock.now() - lock.updated_at).total_seconds() if lock.updated_at else None
    log.warning(
        f"{table.uri} is blocked at batch {lock.failed_rel!r}; nothing more is applied until: "
        f"{lock.unlock_command}",
        extra={
            "event": "table_still_blocked",
            "table": table.prefix,
            "job_id": lock.job_id,
            "rel": lock.failed_rel,
            "lock_age_seconds": age,
        },
    )


def _exit_if_empty(inv: Invocation, table: Table) -> None:
    """Remove `_BACKFILL`, then look at the backlog once more (the publisher writes its pointer
    before it looks at `_BACKFILL`, so one of the two always sees the other). True: exited."""
    current = inv.store.stat(table.backfill)
    if current is not None:
        try:
            inv.store.delete(table.backfill, if_generation=current.generation)
        except PreconditionFailed:
            return  # a newer _BACKFILL arrived: its own run takes over
    if backlog_head(inv, table, 1):
        ensure_subscriber(inv, table)
