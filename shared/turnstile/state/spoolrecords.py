"""What the warm drivers' spool in the bucket holds (names: `turnstile.names.driverspool`), and the
pure rules read from it: which driver takes requests, which one is dead, what a job's state is.

Every record carries a new nonce on every write: S3 compares by ETag (a hash of the bytes), so no
two writes of a name may carry the same bytes. docs/DRIVER.md ("The spool in the bucket") says who
writes what, with which precondition, and why each race is safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, Field, field_validator

from turnstile.state.records import Record, new_nonce


class RequestState(StrEnum):
    QUEUED = "QUEUED"  # waiting for a driver
    CLAIMED = "CLAIMED"  # a driver took it (compare-and-swap from QUEUED)
    WITHDRAWN = "WITHDRAWN"  # cancelled before any driver took it (compare-and-swap from QUEUED)
    LOST = "LOST"  # written where a request was gone, so that a late create of it fails: never runs


class SpoolRequest(Record):
    """`requests/<µs>-<job>.json`: one job for any driver; removed once the job's end is recorded."""

    job_id: str
    table: str
    body: dict[str, Any] = Field(default_factory=dict)  # what the job needs (its manifest, ...)
    submitted_at: AwareDatetime
    state: RequestState = RequestState.QUEUED
    driver_id: str | None = None
    instance: str | None = None  # the claiming driver's instance: a retried claim knows its own
    claimed_at: AwareDatetime | None = None
    # WITHDRAWN because no driver started in time (not an operator's cancel): why. Its job's end
    # is then a transient failure the protocol retries, not a cancel.
    reason: str | None = None
    # More of its table's backlog waits behind it: the next job of the table comes as soon as this
    # one commits, so an idle driver waits for it (`driver_policy.DriverView.awaited`).
    more_queued: bool = False
    nonce: str = Field(default_factory=new_nonce)


class Submitted(Record):
    """`jobs/<job>/submitted.json`: the request a job was queued as (a repeated submit attaches)."""

    job_id: str
    request: str
    table: str
    submitted_at: AwareDatetime


class JobStarted(Record):
    """`jobs/<job>/started.json`: created if absent by the one driver that runs the job."""

    job_id: str
    driver_id: str
    instance: str
    request: str
    started_at: AwareDatetime


class Outcome(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # the job failed and said why
    FAILED_TRANSIENT = "FAILED_TRANSIENT"  # never ran, or its driver died: the runner retries the job
    WITHDRAWN = "WITHDRAWN"  # cancelled while queued: never ran
    CANCELLED = "CANCELLED"  # cancelled while it ran: stopped at a batch boundary (`StopRequest`)


class StopRequest(Record):
    """`jobs/<job>/stop.json`: a cancel of a job a driver runs. The driver's heartbeat sees it and
    the job stops before its next batch; what it committed stays committed."""

    job_id: str
    requested_at: AwareDatetime
    nonce: str = Field(default_factory=new_nonce)


class JobFinished(Record):
    """`jobs/<job>/finished.json`: created if absent, once: by the driver that ran the job, by whoever
    finds its driver dead or its request gone, or by a withdraw. The first writer's outcome stands."""

    job_id: str
    outcome: Outcome
    driver_id: str | None = None
    error: str | None = None
    finished_at: AwareDatetime


class DriverState(StrEnum):
    STARTING = "STARTING"  # announced by whoever launched the batch; not up yet
    RUNNING = "RUNNING"  # takes requests
    LEAVING = "LEAVING"  # takes only the requests it listed right after it said so, then GONE
    GONE = "GONE"  # left cleanly
    DEAD = "DEAD"  # its heartbeat went stale: fenced (its next compare-and-swap fails)


class DriverRecord(Record):
    """`drivers/<driver>.json`: one driver (a Dataproc batch or an EMR job run)."""

    driver_id: str
    batch: str  # the batch id or job-run id that runs it
    state: DriverState
    started_at: AwareDatetime
    heartbeat_at: AwareDatetime
    instance: str | None = None  # the process that registered (a second start of the id leaves)
    serving: tuple[str, ...] = ()  # the requests it is about to claim or runs, side by side
    slots: int = 1  # how many it runs at once: with a slot free it takes the next request itself
    jobs_served: int = 0
    idle_since: AwareDatetime | None = None  # when it last had nothing to run (None: running a job)
    reason: str | None = None  # why it left, or why it was declared dead
    leaving_at: AwareDatetime | None = None  # when it wrote LEAVING, just before it listed the queue
    nonce: str = Field(default_factory=new_nonce)

    @field_validator("serving", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        """A record written when a driver ran one job at a time names one request, or none."""
        if value is None:
            return ()
        return (value,) if isinstance(value, str) else value


class RejectedRequest(Record):
    """`rejected/<request name>`: a request object no driver could read, and why."""

    request: str
    error: str
    driver_id: str
    rejected_at: AwareDatetime


@dataclass(frozen=True)
class SpoolBounds:
    """How long a driver may go without a heartbeat, or an announced one without starting, before
    it counts as dead; how long records of drivers that ended are kept."""

    stale_after: timedelta = timedelta(minutes=10)
    start_within: timedelta = timedelta(minutes=5)
    keep: timedelta = timedelta(hours=1)


def death(record: DriverRecord, now: datetime, bounds: SpoolBounds) -> str | None:
    """Why a driver counts as dead, or None while it may still be at work."""
    if record.state is DriverState.DEAD:
        return record.reason or "declared dead"
    if record.state is DriverState.STARTING and now - record.started_at > bounds.start_within:
        return f"announced at {record.started_at.isoformat()} and never started"
    if (
        record.state in (DriverState.RUNNING, DriverState.LEAVING)
        and now - record.heartbeat_at > bounds.stale_after
    ):
        return f"no heartbeat since {record.heartbeat_at.isoformat()}"
    return None


def taking(record: DriverRecord, now: datetime, bounds: SpoolBounds) -> bool:
    """Whether a driver takes new requests (or will, once started)."""
    return record.state in (DriverState.STARTING, DriverState.RUNNING) and death(record, now, bounds) is None


def needs_driver(records: Iterable[DriverRecord], now: datetime, bounds: SpoolBounds) -> bool:
    """Read after a request is queued: True when no driver will take it, so one must start."""
    return not any(taking(r, now, bounds) for r in records)


def listed_by_leaving(
    records: Iterable[DriverRecord], queued_at: datetime, now: datetime, bounds: SpoolBounds
) -> bool:
    """Whether a live driver said LEAVING after `queued_at`: it lists the queue after that, so it
    serves a request queued then, and no driver needs to start for it. (A driver's clock ahead of
    the reader's only makes the reader wait for that driver to leave: then none is LEAVING.)"""
    return any(
        r.state is DriverState.LEAVING
        and r.leaving_at is not None
        and r.leaving_at >= queued_at
        and death(r, now, bounds) is None
        for r in records
    )


def prunable(record: DriverRecord, now: datetime, bounds: SpoolBounds) -> bool:
    """A record of a driver that ended long ago and holds no request of its own."""
    ended = record.state in (DriverState.GONE, DriverState.DEAD)
    return ended and not record.serving and now - record.heartbeat_at > bounds.keep


def claimant_lost(
    record: DriverRecord | None, instance: str | None, since: datetime, now: datetime, bounds: SpoolBounds
) -> str | None:
    """Why a job claimed (or started) by a driver instance at `since` can no longer end by that
    driver, or None while it may. A record deleted by hand is re-created by its driver's next
    heartbeat: only after a stale bound does its absence mean death."""
    if record is None:
        return None if now - since <= bounds.stale_after else "its driver's record is gone"
    if record.instance is not None and instance is not None and record.instance != instance:
        return f"driver {record.driver_id} was taken over by another start of it"
    if record.state is DriverState.GONE:
        return f"driver {record.driver_id} left without finishing it"
    reason = death(record, now, bounds)
    return None if reason is None else f"driver {record.driver_id} died ({reason})"
