"""Claims: act on one event generation once, surviving crashes (a lease, not a flag).

Write first, read only on conflict: the claim is created IN_PROGRESS with a lease that ends when
the invocation must have ended; on conflict the caller learns whether the event was done
(duplicate: acknowledge), is being handled (transient: retry later) or was abandoned by a crashed
invocation (take it over by compare-and-swap).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from turnstile.core.errors import ConfigError, PreconditionFailed, Transient, TurnstileError
from turnstile.names.paths import claim_name
from turnstile.state.records import Claim, ClaimState
from turnstile.store.port import ObjectStore, object_uri


class EventInProgress(TurnstileError, Transient):
    """Another invocation holds this event's claim; retry after its lease."""


@dataclass
class Held:
    """A claim this invocation holds; `done()` marks the event handled, `release()` gives it back."""

    store: ObjectStore
    name: str
    generation: int
    claim: Claim

    def done(self) -> None:
        finished = self.claim.model_copy(update={"state": ClaimState.DONE})
        try:
            self.store.replace(self.name, finished.encode(), if_generation=self.generation)
        except PreconditionFailed:
            pass  # our lease ran out and another invocation took over: it will mark it

    def release(self) -> None:
        """Give the event back after a transient failure, so its redelivery is handled at once
        instead of waiting for this claim's lease to run out. Best effort: the lease still holds."""
        try:
            self.store.delete(self.name, if_generation=self.generation)
        except TurnstileError:
            pass  # taken over, or the store is down: the lease ends the claim anyway


def claim(
    store: ObjectStore, name: str, generation: int, *, owner: str, now: datetime, lease: timedelta
) -> Held | None:
    """Claim event (name, generation). None means it was already handled: a duplicate."""
    claimed = claim_name(name, generation)
    record = Claim(state=ClaimState.IN_PROGRESS, owner=owner, expires_at=now + lease)
    try:
        return Held(store, claimed, store.create(claimed, record.encode()), record)
    except PreconditionFailed as conflict:
        found = conflict.found
    if found is None:  # deleted between our write and our read (the sweeper): try once more
        return claim(store, name, generation, owner=owner, now=now, lease=lease)
    try:
        existing = Claim.decode(found.data, object_uri(store, claimed))
    except ConfigError:
        existing = Claim(
            state=ClaimState.IN_PROGRESS, owner="unknown", expires_at=now
        )  # unreadable: take over
    if existing.owner == owner:  # our own earlier attempt landed (a retried write)
        return Held(store, claimed, found.generation, record)
    if existing.state is ClaimState.DONE:
        return None
    if existing.expires_at > now:
        raise EventInProgress(f"gs://{store.bucket}/{name}#{generation} is being handled by {existing.owner}")
    try:  # abandoned: take it over, but only from the claim we read
        return Held(
            store, claimed, store.replace(claimed, record.encode(), if_generation=found.generation), record
        )
    except PreconditionFailed as exc:
        raise EventInProgress(
            f"gs://{store.bucket}/{name}#{generation}: another invocation took it over"
        ) from exc
