"""One reader of a table's state objects, for the subscriber, the sweeper and `turnstile status`.

Each read is made on first use and kept: a caller pays only for what it looks at, and looks at each
object once. A `TableState` is a snapshot for one decision; read a new one after changing anything.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from functools import cached_property

from turnstile.errors import ConfigError
from turnstile.paths import Table, claim_name
from turnstile.protocol import backlog, lock
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef
from turnstile.records import Claim, ClaimState, Lock
from turnstile.store.port import ObjectInfo


class Subscriber(StrEnum):
    """Whether a subscriber run is scheduled or running for the table, judged from `_BACKFILL` and
    the claim of its generation."""

    IDLE = "idle"  # no `_BACKFILL`: nothing scheduled
    PENDING = "pending"  # a `_BACKFILL` whose event may still be on its way
    RUNNING = "running"  # a run holds the claim, within its lease
    STOPPED = "stopped"  # the run of this `_BACKFILL` ended
    ABANDONED = "abandoned"  # a run held the claim past its lease: it crashed
    LOST = "lost"  # an old `_BACKFILL` nobody claimed: its event was lost

    @property
    def live(self) -> bool:
        return self in (Subscriber.PENDING, Subscriber.RUNNING)


class TableState:
    def __init__(self, inv: Invocation, table: Table) -> None:
        self.inv = inv
        self.table = table
        self.now = inv.clock.now()
        self._backlog: tuple[int, tuple[PointerRef, ...]] | None = None

    # --- the lock -------------------------------------------------------------------------
    @cached_property
    def _lock(self) -> tuple[Lock, int]:
        return lock.read(self.inv, self.table)

    @property
    def lock(self) -> Lock:
        """Raises `ConfigError` when `_bqlock` holds something turnstile did not write."""
        return self._lock[0]

    @property
    def lock_generation(self) -> int:
        return self._lock[1]

    @property
    def lock_age(self) -> float | None:
        """Seconds since the lock last changed."""
        return self.age(self.lock.updated_at)

    # --- the backlog ----------------------------------------------------------------------
    def backlog(self, limit: int = backlog.LOOKAHEAD) -> tuple[PointerRef, ...]:
        """The first `limit` pointers; a later call for as many or fewer reuses the listing."""
        if self._backlog is None or self._backlog[0] < limit:
            self._backlog = (limit, backlog.head(self.inv, self.table, limit))
        return self._backlog[1][:limit]

    # --- `_BACKFILL`, its claim, the gate --------------------------------------------------
    @cached_property
    def backfill(self) -> ObjectInfo | None:
        return self.inv.store.stat(self.table.backfill)

    @property
    def backfill_age(self) -> float | None:
        return None if self.backfill is None else self.age(self.backfill.updated)

    @cached_property
    def _claim(self) -> tuple[Claim | None, str | None]:
        if self.backfill is None:
            return None, None
        name = claim_name(self.table.backfill, self.backfill.generation)
        found = self.inv.store.read(name)
        if found is None:
            return None, None
        try:
            return Claim.decode(found.data, f"gs://{self.inv.store.bucket}/{name}"), None
        except ConfigError as exc:
            return None, str(exc)

    @property
    def claim(self) -> Claim | None:
        """The claim of the current `_BACKFILL` generation (None: none, or unreadable)."""
        return self._claim[0]

    @property
    def claim_error(self) -> str | None:
        return self._claim[1]

    @property
    def subscriber(self) -> Subscriber:
        lease = self.inv.lease.total_seconds()
        age = self.backfill_age
        if age is None:
            return Subscriber.IDLE
        claim = self.claim
        if claim is None:
            return Subscriber.PENDING if age < lease else Subscriber.LOST
        if claim.state is ClaimState.DONE:
            return Subscriber.STOPPED
        return Subscriber.RUNNING if claim.expires_at > self.now else Subscriber.ABANDONED

    @property
    def gate(self) -> str | None:
        """The START_BACKFILL_FILENAME object of the table, when one is configured."""
        name = self.inv.settings.start_backfill_filename
        return self.table.gate(name) if name else None

    @cached_property
    def gate_present(self) -> bool | None:
        """None when no gate is configured."""
        return None if self.gate is None else self.inv.store.stat(self.gate) is not None

    @property
    def gated(self) -> bool:
        return self.gate_present is False

    @property
    def paused(self) -> bool:
        """WAIT_FOR_VALIDATION: the present `_BACKFILL` already started the last job."""
        return (
            self.inv.settings.wait_for_validation
            and not self.lock.attempt  # a retry after a transient failure needs no new go-ahead
            and self.backfill is not None
            and self.backfill.generation == self.lock.backfill_generation
        )

    def age(self, then: datetime | None) -> float | None:
        return None if then is None else (self.now - then).total_seconds()
