"""One reader of a table's state objects, for the subscriber, the sweeper and `turnstile status`.

Each read is made on first use and kept: a caller pays only for what it looks at, and looks at each
object once. A `TableState` is a snapshot for one decision; read a new one after changing anything.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from turnstile.config.lineage_config import Lineage
from turnstile.core import logs
from turnstile.core.errors import ConfigError, CorruptState, PathError
from turnstile.core.memo import cached_property
from turnstile.jobs.port import JobState, JobStatus
from turnstile.names.paths import Table, claim_name
from turnstile.protocol import backlog, lock, reprocess
from turnstile.protocol import lineage as lineage_io
from turnstile.protocol.context import Invocation
from turnstile.protocol.decide import PointerRef, View
from turnstile.protocol.dependencies import Blocker
from turnstile.state.records import (
    BatchOutcome,
    BatchResult,
    Claim,
    ClaimState,
    JobDone,
    Lock,
    LockState,
    Pause,
)
from turnstile.store.port import ListedObject, ObjectInfo, StoredObject, object_uri

log = logs.get("subscriber")


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

    @cached_property
    def operator_pause(self) -> Pause | None:
        """The table's `turnstile pause` marker, if any."""
        found = self.inv.store.read(self.table.pause)
        if found is None:
            return None
        try:
            return Pause.decode(found.data, object_uri(self.inv.store, found.name))
        except ConfigError:
            return Pause(reason="unreadable pause marker", at=self.now)  # paused all the same

    @property
    def paused(self) -> bool:
        """WAIT_FOR_VALIDATION: the present `_BACKFILL` already started the last job."""
        return (
            self.inv.settings.wait_for_validation
            and not self.lock.attempt  # a retry after a transient failure needs no new go-ahead
            and self.backfill is not None
            and self.backfill.generation == self.lock.backfill_generation
        )

    # --- dependencies ----------------------------------------------------------------------
    @cached_property
    def _lineage(self) -> tuple[Lineage | None, str | None]:
        """The lineage keys as configured, and why a dependency can never be met (if one cannot)."""
        try:
            found = lineage_io.configured(self.inv, self.table)
        except (ConfigError, PathError):
            return None, None
        try:
            lineage_io.check_sources(self.inv, self.table, found)
        except (ConfigError, PathError) as exc:
            return found, str(exc)
        return found, None

    @property
    def lineage(self) -> Lineage | None:
        """The table's lineage keys; None when its config cannot be read or a dependency can never be
        met (the subscriber blocks the lock on that when it describes the head batch)."""
        found, never_met = self._lineage
        return None if never_met else found

    @property
    def derived(self) -> Lineage | None:
        """A derived table's lineage keys, whether or not its dependencies can be met."""
        found = self._lineage[0]
        return found if found is not None and found.derived else None

    @property
    def never_met(self) -> str | None:
        """Why a derived table's dependency can never be met: with no head batch to block on, the
        subscriber blocks its lock with this."""
        return self._lineage[1] if self.derived else None

    @cached_property
    def _gating(self) -> tuple[tuple[Blocker, ...], int]:
        head = self.backlog()
        if self.lineage is None:
            return (), len(head)
        return lineage_io.head_blockers(self.inv, self.lineage, tuple(p.rel for p in head), self.now)

    @property
    def blockers(self) -> tuple[Blocker, ...]:
        """What the head batch waits for (dependencies' watermarks, the delay); empty: nothing."""
        return self._gating[0]

    @property
    def ready(self) -> int:
        """How many leading backlog batches wait for nothing: one job covers no more."""
        return self._gating[1]

    # --- unordered batches: held while paused, failed ------------------------------------------
    @cached_property
    def held(self) -> list[ListedObject]:
        """The records of unordered batches held while the table is paused (one listing, no read)."""
        return self.inv.store.list_entries(self.table.held)

    @cached_property
    def failure_records(self) -> list[ListedObject]:
        """The failure records of unordered batches (one listing, no read)."""
        return self.inv.store.list_entries(self.table.failures)

    def age(self, then: datetime | None) -> float | None:
        return None if then is None else (self.now - then).total_seconds()

    def view(self) -> View:
        return subscriber_view(self)


def subscriber_view(state: TableState) -> View:
    """What `decide` looks at, read from the table (and, for a held lock, from the job's end)."""
    inv, table, held = state.inv, state.table, state.lock
    if held.state is LockState.RUNNING:
        if not held.job_id or not held.manifest:
            raise CorruptState(
                f"{object_uri(inv.store, table.lock)} is RUNNING but names no job or manifest; it was "
                f"written by something else. Fix or delete it, then run: turnstile resume {table.uri}"
            )
        # The job's done signal is its end: the runner may still call it RUNNING for a while
        # (the driver stopping, Dataproc tearing down), and nothing else would wake us then.
        signal = read_done_signal(inv, table, held.job_id)
        if signal is not None:
            state_ = JobState.SUCCEEDED if signal.succeeded else JobState.FAILED
            job: JobStatus | None = JobStatus(held.job_id, state_, signal.error)
            return View(lock=held, head=(), job=job, outcomes=dict(signal.outcomes))
        job = inv.runner.status(held.job_id)
        if job is None:  # never submitted, or the service did not take it: submitted again unless
            return View(  # cancelled, paused, or its submit's retry is not due yet
                lock=held,
                head=(),
                backing_off=held.retry_at is not None and held.retry_at > state.now,
                paused=state.operator_pause is not None,
            )
        outcomes = _results(inv, table, held) if job.state.finished else None
        return View(lock=held, head=(), job=job, outcomes=outcomes)
    if held.state is LockState.FAILED:
        return View(lock=held, head=())
    if state.gated:
        return View(lock=held, head=(), gate_open=False)
    head = state.backlog()
    may_start = True
    if inv.settings.wait_for_validation and head:
        # One job per _BACKFILL generation: the one that started the last job cannot start another.
        # A retry after a transient failure needs no new go-ahead: the batch was allowed already.
        current = state.backfill
        may_start = held.attempt > 0 or (
            current is not None and current.generation != held.backfill_generation
        )
    # Strictly before the position: a new `_SUCCESS` generation of the last batch applied (a
    # re-upload, or every batch of a flat `<ds>/<tbl>/_SUCCESS` table) is the next batch, not a late
    # one; a copy of the same generation is skipped by the job as already committed.
    position = None if held.position is None else table.pointer(held.position, inv.settings.success_filename)
    behind = (
        bool(head) and position is not None and head[0].name <= position and head[0].name != held.allow_late
    )
    late = behind and position is not None and head[0].name < position
    applied = behind and backlog.already_applied(inv, table, head[0])
    backing_off = held.retry_at is not None and held.retry_at > state.now
    request, barrier = reprocess.due(inv, table, head)
    paused = (bool(head) or request is not None) and state.operator_pause is not None
    waiting = () if behind else tuple(b.describe() for b in state.blockers)
    return View(
        lock=held,
        head=head[: max(1, state.ready)],
        may_start=may_start,
        head_is_late=late,
        head_applied=applied,
        backing_off=backing_off,
        paused=paused,
        reprocess=request,
        reprocess_after=barrier,
        waiting_for=waiting,
    )


def read_done_signal(inv: Invocation, table: Table, job_id: str) -> JobDone | None:
    """The job's done signal; None when there is none, or when it does not decode."""
    found = inv.store.read(table.done_signal(job_id))
    return None if found is None else decode_done_signal(inv, table, found)


def decode_done_signal(inv: Invocation, table: Table, found: StoredObject) -> JobDone | None:
    """None when it does not decode (another version's job, a hand edit): the job's end is then
    read from the job service and the result records, as for a job that died before writing it."""
    try:
        return JobDone.decode(found.data, object_uri(inv.store, found.name))
    except ConfigError as exc:
        log.warning(
            f"{exc}; the job's end is read from the job service and the result records instead",
            extra={"event": "record_unreadable", "table": table.prefix, "object": found.name},
        )
        return None


def _outcome(inv: Invocation, table: Table, found: StoredObject) -> BatchOutcome | None:
    """A result record's outcome; None when it does not decode: the batch counts as not applied,
    so the next attempt's job finds its commit (if any) and writes the record again."""
    try:
        return BatchResult.decode(found.data, object_uri(inv.store, found.name)).outcome
    except ConfigError as exc:
        log.warning(
            f"{exc}; the batch counts as not applied: the retry finds its commit, if any, and records it",
            extra={"event": "record_unreadable", "table": table.prefix},
        )
        return None


def _results(inv: Invocation, table: Table, held: Lock) -> dict[str, BatchOutcome]:
    """How each covered batch of a job that ended without its done signal (it crashed) ended:
    from the per-batch result records it wrote before."""
    outcomes = {}
    for covered in held.covers:
        name = table.result(covered.rel, covered.success_generation)
        if covered.reprocess:  # its own record, not the one of the commit it repeats
            request_id = reprocess.request_id_of(covered.pointer)
            name = reprocess.result_name(table, covered.rel, covered.success_generation, request_id)
        found = inv.store.read(name)
        if found is not None and (outcome := _outcome(inv, table, found)) is not None:
            outcomes[covered.rel] = outcome
    return outcomes
