"""Reconciliation: publish the `_SUCCESS` objects whose events never came (the functions were down
or misconfigured, a notification was lost, Eventarc's retention ran out), from the sweeper.

Per table, one bounded listing, from a cursor to the end, skipping turnstile's reserved `_` folders.
The cursor is the oldest batch that may still be unhandled: for an ordered table, the last applied
batch's folder (or the table's start while nothing is applied: everything is pending then); for an
unordered table, `<table>/_turnstile/cursor`, the first batch that was not yet committed at the last
sweep. A `_SUCCESS` found there whose live
generation is neither queued (its pointer names it) nor recorded (a result record, or for an
unordered table a record that it is held by `turnstile pause` or failed) goes to the handler
exactly as if its event had arrived; the handler's effects are idempotent, so an event in flight at
the same time changes nothing. A failed batch stays failed until the watchdog retries it when due
or `turnstile retry` does.

Not covered (documented): a batch re-uploaded, or arriving late, below the cursor whose event is
lost; `turnstile backfill` finds those.
"""

from __future__ import annotations

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.paths import ObjectKind, ObjectRef, Table, classify
from turnstile.protocol import backlog, handler
from turnstile.protocol.context import Invocation
from turnstile.protocol.state import TableState
from turnstile.store.port import ObjectInfo

log = logs.get("reconcile")
CURSOR = "cursor"


def cursor_name(table: Table) -> str:
    return f"{table.internal}{CURSOR}"


def reconcile(state: TableState) -> int:
    """Publish the table's unannounced batches; return how many were handed to the handler."""
    inv, table = state.inv, state.table
    position = state.lock.position
    stored = None if position is not None else inv.store.read(cursor_name(table))
    start = table.batch_folder(position) if position is not None else f"{table.prefix}/"
    if position == "":  # a flat table (its batches at its root): its folder holds nothing after that
        start = table.success("", inv.settings.success_filename)
    if stored is not None:
        start = max(start, stored.text())
    settings = inv.settings
    successes = backlog.batch_objects(  # only the `_SUCCESS` objects: on S3 each listed costs a HEAD
        inv,
        table,
        start,
        only=lambda name: (
            classify(name, settings.success_filename, settings.start_backfill_filename) is ObjectKind.SUCCESS
        ),
    )
    if not successes:
        return 0
    queued = _queued(inv, table)
    published = 0
    first_open: str | None = None
    for info in successes:
        try:
            batch, _ = inv.batch(info.name)
        except (ConfigError, PathError):
            batch = None  # the handler reports it (and queues it when it is certainly ordered)
        if batch is not None and batch.table.prefix != table.prefix:
            continue  # a destination regex maps it to another table: that table's sweep sees it
        if batch is not None and batch.rel in queued:
            first_open = first_open or info.name
            continue
        outcome = backlog.recorded_outcome(inv, table, batch.rel, info.generation) if batch else None
        if outcome in backlog.APPLIED:
            continue
        first_open = first_open or info.name
        if outcome is None and _recorded(state, info):
            continue  # held by a pause, or failed: released by resume, retried when due or by command
        if outcome is None:  # neither queued nor recorded: its event never came, or its job runs
            ref = ObjectRef(inv.store.bucket, info.name, info.generation, ObjectKind.SUCCESS)
            result = handler.handle(inv, ref)
            if result in (handler.Handled.QUEUED, handler.Handled.SUBMITTED):
                published += 1
                log.warning(
                    f"published {ref.uri}, whose event never arrived ({result})"
                    + (backlog.skip_hint(inv, batch.folder) if batch and result == "queued" else ""),
                    extra={"event": "batch_reconciled", "table": table.prefix, "object": ref.uri},
                )
    if state.lock_generation == 0 and not queued:  # an unordered table: nothing else bounds the listing
        _advance(inv, table, stored.text() if stored else None, first_open or successes[-1].name)
    return published


def _recorded(state: TableState, success: ObjectInfo) -> bool:
    """The unordered batch of this `_SUCCESS` generation is held while the table is paused, or
    failed (also when its config does not resolve: refused): its record's name is in the sweep's
    listing of `held/` or `failures/` (each made once, when first needed; the watchdog reuses them).
    Handing it to the handler again would hold it again, or record its failure again (and of a batch
    whose submit was refused, submit attempt 0 again at once, without the backoff)."""
    table, filename = state.table, state.inv.settings.success_filename
    rel = success.name.removeprefix(f"{table.prefix}/").removesuffix(filename).rstrip("/")
    if table.success(rel, filename) != success.name:
        return False
    if table.held_batch(rel, success.generation) in {info.name for info in state.held}:
        return True
    return table.failure(rel, success.generation) in {info.name for info in state.failure_records}


def _queued(inv: Invocation, table: Table) -> set[str]:
    """The rels with a pointer in the backlog (one listing, no reads)."""
    found = set()
    for info in inv.store.list_entries(table.backlog):
        try:
            found.add(table.rel_of_pointer(info.name, inv.settings.success_filename))
        except PathError:
            continue
    return found


def _advance(inv: Invocation, table: Table, current: str | None, success_name: str) -> None:
    """Move the cursor to the folder of `success_name` (the first batch still open, or the last one
    seen: starting at its folder again sees a re-upload of it)."""
    cursor = success_name.rpartition("/")[0] + "/"
    if cursor != current:
        inv.store.write(cursor_name(table), cursor.encode())
