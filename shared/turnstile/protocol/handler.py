"""Routes one object event to the part of the protocol it concerns.

Events arrive at least once, duplicated and in any order. Objects that are not action files return
at once, before any storage call. Terminal errors (bad path, bad config) are logged and
acknowledged; transient ones propagate so the platform redelivers the event.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum

from turnstile.core import logs
from turnstile.core.errors import ConfigError, PathError, Terminal, TurnstileError
from turnstile.names.paths import Batch, ObjectKind, ObjectRef, parse_success
from turnstile.protocol import publisher, subscriber, unordered
from turnstile.protocol.claims import Held, claim
from turnstile.protocol.context import Invocation
from turnstile.protocol.state import decode_done_signal
from turnstile.store.port import object_uri

log = logs.get("handler")


class Handled(StrEnum):
    """What the handler did with one event (a subscriber run answers with its `Stopped` instead)."""

    IGNORED = "ignored"  # not an action object, or gone
    REJECTED = "rejected"  # terminal error: logged and acknowledged
    STALE = "stale"  # an older generation than the live one
    QUEUED = "queued"  # an ordered batch's pointer is written
    SUBMITTED = "submitted"  # an unordered batch's job is submitted
    FAILED = "failed"  # an unordered batch refused (its config, the job service): recorded as failed
    HELD = "held"  # an unordered batch of a paused table: submitted on `turnstile resume`
    DUPLICATE = "duplicate"  # already handled
    ENSURED = "ensured"  # a subscriber run is scheduled
    REPORTED = "reported"  # an unordered job's end is reported
    MISCONFIGURED = "misconfigured"  # a bad setting: acknowledged, reported once per instance


def handle(inv: Invocation, ref: ObjectRef) -> str:
    """Act on one object generation; return a word saying what was done."""
    if not ref.kind.is_action:
        return Handled.IGNORED
    fields = {"object": object_uri(inv.store, ref.name), "generation": ref.generation, "kind": ref.kind.value}
    try:
        return _route(inv, ref)
    except TurnstileError as exc:
        if not isinstance(exc, Terminal):
            raise
        # Say how to get it applied; a pointer someone else wrote may have queued it all the same.
        retry = (
            f"; fix it, then upload {fields['object']} again, unless turnstile status shows it queued"
            if ref.kind is ObjectKind.SUCCESS
            else ""
        )
        log.error(f"rejected: {exc}{retry}", extra=fields | {"event": "rejected", "error": str(exc)})
        return Handled.REJECTED


def _route(inv: Invocation, ref: ObjectRef) -> str:
    if ref.kind is ObjectKind.SUCCESS:
        # No claim: queuing a pointer and submitting a job under a deterministic id are idempotent.
        return _success(inv, ref)
    table = ref.table
    if ref.kind is ObjectKind.GATE:
        publisher.ensure_subscriber(inv, table)
        return Handled.ENSURED
    if ref.kind is ObjectKind.BACKFILL:
        held = claim(
            inv.store, ref.name, ref.generation, owner=inv.invocation_id, now=inv.clock.now(), lease=inv.lease
        )
        if held is None:
            return Handled.DUPLICATE
        with _settled(held):
            unordered.release_held(inv, table)  # `turnstile resume` of a paused unordered table
            return subscriber.run(inv, table)
    # JOB_DONE: wake the subscriber of an ordered table; report the end of an unordered job.
    found = inv.store.read(ref.name)
    if found is None:
        return Handled.IGNORED
    done = decode_done_signal(inv, table, found)
    if done is None:  # unreadable: an ordered table's run reads the job's end elsewhere (an
        return subscriber.run(inv, table)  # unordered job's end, the watchdog, from its marker)
    if not done.ordered:
        unordered.ended(inv, table, done)
        return Handled.REPORTED
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


def _success(inv: Invocation, ref: ObjectRef) -> str:
    ordered = _ordered_from_above(inv, ref)
    if ordered is not None:
        publisher.publish(inv, ordered, ref.generation)
        return Handled.QUEUED
    try:
        batch, resolved = inv.batch(ref.name)
    except ConfigError as exc:
        queued = _ordered_despite_config(inv, ref)
        if queued is None:
            return _refuse_unordered(inv, ref, exc)
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
        publisher.publish(inv, queued, ref.generation)
        return Handled.QUEUED
    if resolved.ordered or inv.settings.order_per_table:
        # Queued without a stat: the subscriber applies the generation live when it lists the batch,
        # so a stale event's pointer applies the newest data once, or is dropped as applied.
        publisher.publish(inv, batch, ref.generation)
        return Handled.QUEUED
    # Only the live generation is acted on: an older one's data has been overwritten.
    live = inv.store.stat(ref.name)
    if live is None or live.generation != ref.generation:
        return Handled.STALE
    refusal = unordered.lineage_refusal(inv, batch, resolved)
    if refusal is not None:
        unordered.refused(inv, batch, ref.generation, refusal)
        return Handled.REJECTED
    if unordered.hold(inv, batch, ref.generation):
        return Handled.HELD
    return Handled(unordered.apply(inv, batch, resolved, ref.generation).value)


def _ordered_from_above(inv: Invocation, ref: ObjectRef) -> Batch | None:
    """The batch of a `_SUCCESS` that the levels above its folder already make ordered (ORDERME,
    or ORDER_PER_TABLE), parsed with their destination regex; None when only the whole cascade can
    tell. Its own folder's `_config/` is new for every batch, so it is not listed here: the
    subscriber, whose listing of the batch shows that folder, resolves the whole cascade before
    the batch is applied (and blocks the table if that folder's load.json moves it elsewhere)."""
    if not ref.folder:
        return None
    above = ref.folder[:-1].rpartition("/")[0]
    try:
        upper = inv.configs.resolve(f"{above}/" if above else "")
    except ConfigError:
        return None  # the whole cascade decides, and reports the error
    if not (upper.ordered or inv.settings.order_per_table):
        return None
    try:
        return parse_success(
            inv.store.bucket, ref.name, upper.load.destination_regex or inv.settings.destination_regex
        )
    except PathError:
        return None


def _refuse_unordered(inv: Invocation, ref: ObjectRef, exc: ConfigError) -> str:
    """A batch of an unordered table whose config does not validate: recorded as failed (status
    shows it, `turnstile retry` applies it after the fix) when the layout names its table; else
    rejected as a whole (the error says what to fix and which `_SUCCESS` to upload again)."""
    batch = _batch_despite_config(inv, ref)
    if batch is None:
        raise exc
    live = inv.store.stat(ref.name)
    if live is None or live.generation != ref.generation:
        return Handled.STALE
    unordered.refused(inv, batch, ref.generation, str(exc))
    return Handled.REJECTED


def _ordered_despite_config(inv: Invocation, ref: ObjectRef) -> Batch | None:
    """The batch of a `_SUCCESS` whose config does not validate, when it is certainly ordered and
    of the table the layout names; else None (it is rejected)."""
    if not inv.configs.certainly_ordered(ref.folder, everywhere=inv.settings.order_per_table):
        return None
    return _batch_despite_config(inv, ref)


def _batch_despite_config(inv: Invocation, ref: ObjectRef) -> Batch | None:
    """The batch of a `_SUCCESS` whose config does not validate, parsed with DESTINATION_REGEX,
    when no load.json on its path can move it to another table; else None."""
    if not inv.configs.keeps_table(ref.folder):
        return None
    try:
        return parse_success(inv.store.bucket, ref.name, inv.settings.destination_regex)
    except PathError:
        return None
