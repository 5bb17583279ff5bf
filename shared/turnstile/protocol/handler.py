"""Routes one object event to the part of the protocol it concerns.

Events arrive at least once, duplicated and in any order. Objects that are not action files return
at once, before any storage call. Terminal errors (bad path, bad config) are logged and
acknowledged; transient ones propagate so the platform redelivers the event.
"""

from __future__ import annotations

from turnstile import logs
from turnstile.errors import Terminal, TurnstileError
from turnstile.paths import ObjectKind, classify, table_of_state_object
from turnstile.protocol import publisher, subscriber, unordered
from turnstile.protocol.claims import claim
from turnstile.protocol.context import Invocation
from turnstile.records import JobDone

log = logs.get("handler")


def handle(inv: Invocation, name: str, generation: int) -> str:
    """Act on `gs://<bucket>/<name>#<generation>`; return a word saying what was done."""
    settings = inv.settings
    kind = classify(name, settings.success_filename, settings.start_backfill_filename)
    if not kind.is_action:
        return "ignored"
    fields = {"object": f"gs://{inv.store.bucket}/{name}", "generation": generation, "kind": kind.value}
    try:
        return _route(inv, kind, name, generation)
    except TurnstileError as exc:
        if not isinstance(exc, Terminal):
            raise
        log.error(f"rejected: {exc}", extra=fields | {"event": "rejected", "error": str(exc)})
        return "rejected"


def _route(inv: Invocation, kind: ObjectKind, name: str, generation: int) -> str:
    bucket = inv.store.bucket
    if kind is ObjectKind.SUCCESS:
        held = claim(
            inv.store, name, generation, owner=inv.invocation_id, now=inv.clock.now(), lease=inv.lease
        )
        if held is None:
            return "duplicate"
        try:
            batch, resolved = inv.batch(name)
            if resolved.ordered or inv.settings.order_per_table:
                publisher.publish(inv, batch, generation)
                outcome = "queued"
            else:
                unordered.apply(inv, batch, name, generation)
                outcome = "submitted"
        except TurnstileError as exc:
            if isinstance(exc, Terminal):
                held.done()  # acknowledged: a redelivery would fail the same way
            raise
        held.done()
        return outcome
    table = table_of_state_object(bucket, name)
    if kind in (ObjectKind.POINTER, ObjectKind.GATE):
        publisher.ensure_subscriber(inv, table)
        return "ensured"
    if kind is ObjectKind.BACKFILL:
        held = claim(
            inv.store, name, generation, owner=inv.invocation_id, now=inv.clock.now(), lease=inv.lease
        )
        if held is None:
            return "duplicate"
        outcome = subscriber.run(inv, table)
        held.done()
        return outcome
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
