"""The backlog publisher: records an ordered batch as a pointer, then makes sure a subscriber runs.

It writes the pointer BEFORE it looks at `_BACKFILL`; the subscriber removes `_BACKFILL` BEFORE it
looks at the backlog a last time. Whatever the interleaving, one of them sees the other's write,
so a batch is never left in a backlog nobody drains (the original loader's empty-backlog race,
docs/PROTOCOL.md).
"""

from __future__ import annotations

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, PreconditionFailed
from turnstile.names.paths import Batch, Table
from turnstile.protocol import lock as table_lock
from turnstile.protocol.context import Invocation
from turnstile.state.records import Pointer, wake_body
from turnstile.store.port import object_uri

log = logs.get("publisher")


def publish(inv: Invocation, batch: Batch, success_generation: int) -> None:
    queue(inv, batch, success_generation)
    ensure_subscriber(inv, batch.table)


def root_batch_refusal(batch: Batch, other: str | None) -> str | None:
    """Why an ordered table whose batches sit in folders (`other`: the last applied, or one of
    them) cannot take a batch at its root (rel ''): None for any other batch, or a flat table."""
    if batch.rel or not other:
        return None
    table = batch.table
    return (
        f"{batch.uri} is a batch at the root of ordered table {table.dataset}.{table.table}, whose "
        f"batches sit in folders below it ({other!r}): it has no place in their order (its pointer, "
        "_backlog/_SUCCESS, sorts after every folder named with a digit or capital, each of which "
        f"would then arrive late and stop the table); upload it into a batch folder, e.g. "
        f"{table.uri}/<batch>/"
    )


def queue(inv: Invocation, batch: Batch, success_generation: int) -> None:
    """Write (or advance) the batch's pointer in the table's backlog; PathError for a batch at the
    root of a table whose batches sit in folders (`root_batch_refusal`)."""
    if not batch.rel:  # one more read, for this layout only
        refusal = root_batch_refusal(batch, table_lock.read(inv, batch.table)[0].position)
        if refusal is not None:
            raise PathError(refusal)
    settings = inv.settings
    pointer = batch.pointer(settings.success_filename)
    record = Pointer(
        success=batch.success(settings.success_filename),
        success_generation=success_generation,
        published_at=inv.clock.now(),
    )
    _write_pointer(inv, pointer, record)
    log.info(
        "batch queued",
        extra={"table": batch.table.prefix, "rel": batch.rel, "generation": success_generation},
    )


def _write_pointer(inv: Invocation, name: str, record: Pointer) -> None:
    """Create the pointer; a newer `_SUCCESS` generation replaces an older one, never the reverse."""
    try:
        inv.store.create(name, record.encode())
        return
    except PreconditionFailed as conflict:
        found = conflict.found
    if found is None:
        # Applied and removed between our write and our read. Queue ours anyway: if it was the same
        # generation, the job finds that batch already committed and skips it.
        return _write_pointer(inv, name, record)
    try:
        existing: Pointer | None = Pointer.decode(found.data, object_uri(inv.store, name))
    except ConfigError:
        existing = None  # not turnstile's (the original loader's empty pointer): adopted below
    if existing is not None and existing.success_generation >= record.success_generation:
        return  # the same event again, or an older one delivered late
    try:
        inv.store.replace(name, record.encode(), if_generation=found.generation)
    except PreconditionFailed:
        return _write_pointer(inv, name, record)  # changed under us: look again
    if existing is None:
        # The subscriber covers pointers from its listing, so the batch was queued either way:
        # rejecting the event would only advise an upload of `_SUCCESS` that applies it twice.
        log.warning(
            f"adopted {object_uri(inv.store, name)}, a backlog pointer turnstile did not write (the "
            "original loader's?): rewritten as turnstile's; its batch stays queued, once",
            extra={"event": "pointer_adopted", "pointer": name},
        )


def ensure_subscriber(inv: Invocation, table: Table) -> None:
    """Start a subscriber run unless one is scheduled or live, or the gate file is still missing."""
    gate = inv.settings.start_backfill_filename
    if gate and inv.store.stat(table.gate(gate)) is None:
        log.info("batch held until the gate file exists", extra={"table": table.prefix, "gate": gate})
        return
    try:
        inv.store.create(table.backfill, wake_body())
    except PreconditionFailed:
        pass  # a run is scheduled or live, and it looks at the backlog before it exits
