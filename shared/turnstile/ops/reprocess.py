"""`turnstile reprocess`: apply an already committed batch once more, deliberately.

Writes a reprocess request (`protocol.reprocess`) and wakes the table's subscriber, which applies it
after every batch queued before it, as a commit of its own recorded as REPROCESSED in the history
next to the original commit. Refused, changing nothing, when the batch is not there, was never
committed (it is queued, running or failed: wait, or retry it), or its table is blocked.
Unordered tables are accepted too: the reprocess is one more apply, through the same request.
"""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.core import logs
from turnstile.core.errors import PreconditionFailed
from turnstile.names.paths import Table
from turnstile.ops.errors import Failed, Refused
from turnstile.protocol import backlog, lock, reprocess
from turnstile.protocol.context import Invocation
from turnstile.protocol.publisher import ensure_subscriber
from turnstile.state.records import LockState, ReprocessRequest
from turnstile.store.port import object_uri

log = logs.get("reprocess")


@dataclass(frozen=True)
class Requested:
    batch: str  # gs:// or s3:// URI of the batch folder
    table: str  # gs:// or s3:// URI of the table
    rel: str
    generation: int  # of the batch's `_SUCCESS`: the commit applied once more
    request: str  # gs:// or s3:// URI of the request object
    queued_after: str | None  # the last batch queued before it, applied first

    def lines(self) -> list[str]:
        after = f" after {self.queued_after!r}, the last batch queued before it" if self.queued_after else ""
        return [
            f"{self.batch} (generation {self.generation}) will be committed once more{after}",
            f"request: {self.request}",
            f"follow it with: turnstile history {self.table}",
        ]


DOES = (
    "Apply an already committed batch once more, deliberately: after the batches queued before it, as "
    "a commit of its own, shown as REPROCESSED by turnstile history."
)


def request(inv: Invocation, success_name: str, reason: str | None = None) -> Requested:
    """Ask for the batch whose `_SUCCESS` is `success_name` to be committed once more."""
    batch, resolved = inv.batch(success_name)  # a path or config that does not resolve says why
    table = batch.table
    success_uri = object_uri(inv.store, success_name)
    where, folder = object_uri(inv.store, table.prefix), object_uri(inv.store, batch.folder)
    live = reprocess.live_generation(inv, success_name, resolved)
    if live is None:
        raise Refused(
            f"{success_uri} does not exist: there is no batch to reprocess there; check the path "
            f"(turnstile history {where} lists the committed batches)"
        )
    if not backlog.recorded_applied(inv, table, batch.rel, live):
        raise Refused(
            f"{folder} (its _SUCCESS generation {live}) was never committed, so there is "
            f"nothing to reprocess: it is queued, running or failed (turnstile status {where}); "
            "wait for it to be applied, or apply a failed one with turnstile retry (unordered table) "
            "or turnstile unlock (ordered table)"
        )
    held, _ = lock.read(inv, table)
    if held.state is LockState.FAILED:
        raise Refused(
            f"{where} is blocked on {held.failed_rel!r} ({held.error}); a reprocess would wait "
            f"behind it: unlock the table first (turnstile unlock {where}), then reprocess"
        )
    success = inv.settings.success_filename
    queued = [
        info.name
        for info in inv.store.list_entries(table.backlog)
        if info.name.endswith(f"/{success}") or info.name == table.backlog + success
    ]
    after = queued[-1] if queued else None
    now = inv.clock.now()
    record = ReprocessRequest(
        success=success_name,
        success_generation=live,
        published_at=now,
        rel=batch.rel,
        after=after,
        requested_at=now,
        reason=reason,
    )
    name = _create(inv, table, record)
    ensure_subscriber(inv, table)  # after the request: an exiting subscriber looks for it last
    log.warning(
        f"reprocess of committed batch {batch.rel!r} of {where} requested by an operator",
        extra={"event": "reprocess_requested", "table": table.prefix, "rel": batch.rel, "request": name},
    )
    rel_after = table.rel_of_pointer(after, success) if after else None
    return Requested(folder, where, batch.rel, live, object_uri(inv.store, name), rel_after)


MAX_ATTEMPTS = 100


def _create(inv: Invocation, table: Table, record: ReprocessRequest) -> str:
    """Write the request under a new name (never replacing another request); return the name."""
    for attempt in range(MAX_ATTEMPTS):
        name = reprocess.request_name(
            table, reprocess.new_request_id(record.requested_at, record.success, attempt)
        )
        try:
            inv.store.create(name, record.encode())
        except PreconditionFailed:
            continue  # the same batch asked for in the same microsecond: the next name
        return name
    raise Failed(f"{object_uri(inv.store, table.prefix)}: no free name for a reprocess request; try again")
