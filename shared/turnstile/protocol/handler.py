"""Routes one object event to the part of the protocol it concerns.

Events arrive at least once, duplicated and in any order. Objects that are not action files return
at once, before any storage call. Terminal errors (bad path, bad config) are logged and
acknowledged; transient ones propagate so the platform redelivers the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from turnstile import logs
from turnstile.errors import ConfigError, PathError, Terminal, TurnstileError
from turnstile.paths import Batch, ObjectKind, classify, parse_success, table_of_state_object
from turnstile.protocol import publisher, subscriber, unordered
from turnstile.protocol.claims import Held, claim
from turnstile.protocol.context import Invocation
from turnstile.records import JobDone
from turnstile.store.port import object_uri

log = logs.get("handler")


def handle(inv: Invocation, name: str, generation: int) -> str:
    """Act on `gs://<bucket>/<name>#<generation>`; return a word saying what was done."""
    settings = inv.settings
    kind = classify(name, settings.success_filename, settings.start_backfill_filename)
    if not kind.is_action:
        return "ignored"
    fields = {"object": object_uri(inv.store, name), "generation": generation, "kind": kind.value}
    try:
        return _route(inv, kind, name, generation)
    except TurnstileError as exc:
        if not isinstance(exc, Terminal):
            raise
        # A rejected batch is not queued anywhere: say how to get it applied.
        retry = f"; fix it, then upload {fields['object']} again" if kind is ObjectKind.SUCCESS else ""
        log.error(f"rejected: {exc}{retry}", extra=fields | {"event": "rejected", "error": str(exc)})
        return "rejected"


def _route(inv: Invocation, kind: ObjectKind, name: str, generation: int) -> str:
    bucket = inv.store.bucket
    if kind is ObjectKind.SUCCESS:
        # No claim: queuing a pointer and submitting a job under a deterministic id are idempotent.
        # Only the live generation is acted on: an older one's data has been overwritten.
        live = inv.store.stat(name)
        if live is None or live.generation != generation:
            return "stale"
        return _success(inv, name, generation)
    table = table_of_state_object(bucket, name)
    if kind is ObjectKind.GATE:
        publisher.ensure_subscriber(inv, table)
        return "ensured"
    if kind is ObjectKind.BACKFILL:
        held = claim(
            inv.store, name, generation, owner=inv.invocation_id, now=inv.clock.now(), lease=inv.lease
        )
        if held is None:
            return "duplicate"
        with _settled(held):
            return subscriber.run(inv, table)
    # JOB_DONE: wake the subscriber of an ordered table; report the end of an unordered job.
    found = inv.store.read(name)
    if found is None:
        return "ignored"
    done = JobDone.decode(found.data, f"gs://{bucket}/{name}")
    if not done.ordered:
        if not done.succeeded:
            log.error(
                f"job {done.job_id} failed: {done.error}",
                extra={
                    "event": "job_failed",
                    "table": table.prefix,
                    "job_id": done.job_id,
                    "error": done.error,
                },
            )
        return "reported"
    return subscriber.run(inv, table)


@contextmanager
def _settled(held: Held) -> Iterator[None]:
    """Mark the claimed event handled, also when retrying cannot help (terminal: acknowledged); on
    any other error give the claim back, so the redelivery is not refused until the lease ends."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, Terminal):
            held.done()
        else:
            held.release()
        raise
    held.done()


def _success(inv: Invocation, name: str, generation: int) -> str:
    try:
        batch, resolved = inv.batch(name)
    except ConfigError as exc:
        queued = _ordered_despite_config(inv, name)
        if queued is None:
            raise
        # Rejecting it would lose it (its claim is done); queued, it blocks its table with this
        # error, and the unlock after the fix applies it in order.
        log.warning(
            f"{exc}; the batch is queued anyway and its table will stop on it until this is fixed",
            extra={
                "event": "config_error",
                "table": queued.table.prefix,
                "rel": queued.rel,
                "error": str(exc),
            },
        )
        publisher.publish(inv, queued, generation)
        return "queued"
    if resolved.ordered or inv.settings.order_per_table:
        publisher.publish(inv, batch, generation)
        return "queued"
    return "submitted" if unordered.apply(inv, batch, name, generation) else "duplicate"


def _ordered_despite_config(inv: Invocation, name: str) -> Batch | None:
    """The batch of a `_SUCCESS` whose config does not validate, when it is certainly ordered and
    of the table the layout names; else None (it is rejected)."""
    folder = name.rpartition("/")[0] + "/"
    if not inv.configs.certainly_ordered(folder, everywhere=inv.settings.order_per_table):
        return None
    try:
        return parse_success(inv.store.bucket, name, inv.settings.destination_regex)
    except PathError:
        return None
