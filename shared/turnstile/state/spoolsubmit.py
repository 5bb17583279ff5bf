"""The submitters' side of the warm drivers' spool in the bucket: queue a job, say whether a driver
must start for it, read a job's state, withdraw a queued job.

"Queue, then look for a driver" here and "say LEAVING, then look at the queue" in a driver
(`turnstile.state.spooldriver`) make "is a driver there to take it" race-free on storage alone:
whichever of the two writes lands second, its reader sees the other's (docs/DRIVER.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state.records import new_nonce
from turnstile.state.spoolreap import (
    decoded_request,
    discard,
    finished,
    read_driver,
    reap,
    report,
    settle_request,
    transient,
)
from turnstile.state.spoolrecords import (
    DriverRecord,
    DriverState,
    JobFinished,
    JobStarted,
    Outcome,
    RequestState,
    SpoolBounds,
    SpoolRequest,
    StopRequest,
    Submitted,
    claimant_lost,
    death,
    listed_by_leaving,
    needs_driver,
    taking,
)
from turnstile.store.port import ObjectStore, StoredObject


@dataclass(frozen=True)
class Queued:
    job_id: str
    request: str  # the request object's name
    driver_needed: bool  # no driver takes requests: the caller starts one (`spoollaunch.claim_launch`)
    drivers: tuple[DriverRecord, ...] = ()  # the drivers read after queueing (none read: attached)


def submit(
    store: ObjectStore,
    clock: Clock,
    job_id: str,
    table: str,
    body: dict[str, Any],
    *,
    bounds: SpoolBounds,
    more_queued: bool = False,
) -> Queued:
    """Queue the job (a repeated submit attaches, and re-creates a request removed by hand before
    any driver started the job), then read the drivers: after the request exists. `more_queued`:
    more of the table's backlog waits behind the job (see `SpoolRequest.more_queued`)."""
    now = clock.now()
    submitted = Submitted(
        job_id=job_id, request=names.request_name(now, job_id), table=table, submitted_at=now
    )
    try:
        store.create(names.submitted_name(job_id), submitted.encode())
    except PreconditionFailed as exc:
        if exc.found is None:
            # Removed meanwhile: queue it again.
            return submit(store, clock, job_id, table, body, bounds=bounds, more_queued=more_queued)
        submitted = Submitted.decode(exc.found.data, exc.found.name)
        if store.stat(names.finished_name(job_id)) is not None:
            return Queued(job_id, submitted.request, driver_needed=False)  # it has ended: attach
        if repair_needed(store, submitted):
            enqueue(store, submitted, body, more_queued)
    else:
        enqueue(store, submitted, body, more_queued)
    records = reap(store, clock, bounds)
    return Queued(job_id, submitted.request, needs_driver(records, clock.now(), bounds), tuple(records))


def waiting(store: ObjectStore, records: Iterable[DriverRecord]) -> tuple[int, datetime | None]:
    """The requests no driver serves yet (one listing), and when the oldest was submitted."""
    serving = {name for record in records for name in record.serving}
    queued = [info.name for info in store.list_objects(names.REQUESTS) if info.name not in serving]
    stamps = [stamp for name in queued if (stamp := names.submitted_at(name)) is not None]
    return len(queued), min(stamps, default=None)


def enqueue(
    store: ObjectStore, submitted: Submitted, body: dict[str, Any], more_queued: bool = False
) -> None:
    request = SpoolRequest(
        job_id=submitted.job_id,
        table=submitted.table,
        body=body,
        submitted_at=submitted.submitted_at,
        more_queued=more_queued,
    )
    try:
        store.create(submitted.request, request.encode())
    except PreconditionFailed:
        pass  # an earlier attempt of this submit landed


def repair_needed(store: ObjectStore, submitted: Submitted) -> bool:
    """The job was queued, and its request is gone although no driver started it and its end is
    not recorded: removed by hand, or the submit stopped between its two writes."""
    return (
        store.stat(submitted.request) is None
        and store.stat(names.started_name(submitted.job_id)) is None
        and store.stat(names.finished_name(submitted.job_id)) is None
    )


def driver_needed(store: ObjectStore, clock: Clock, bounds: SpoolBounds) -> bool:
    """Whether no driver takes requests now (stale ones are declared dead on the way)."""
    return needs_driver(reap(store, clock, bounds), clock.now(), bounds)


def driver_needed_for(store: ObjectStore, clock: Clock, job_id: str, bounds: SpoolBounds) -> bool:
    """Read while a job waits (the runner's status poll): whether no driver takes requests and none
    that is leaving listed the queue after the job was queued. Such a driver serves the job on its
    way out; starting another for it would only start a batch that finds nothing to do."""
    records = reap(store, clock, bounds)
    now = clock.now()
    if not needs_driver(records, now, bounds):
        return False
    queued_at = _queued_at(store, job_id)
    return queued_at is None or not listed_by_leaving(records, queued_at, now, bounds)


def _queued_at(store: ObjectStore, job_id: str) -> datetime | None:
    """When the job was submitted, from its `submitted.json`; None when absent or unreadable."""
    found = store.read(names.submitted_name(job_id))
    if found is None:
        return None
    try:
        return Submitted.decode(found.data, found.name).submitted_at
    except ConfigError:
        return None


class JobState(StrEnum):
    UNKNOWN = "UNKNOWN"  # never submitted (or its records were removed)
    QUEUED = "QUEUED"
    CLAIMED = "CLAIMED"  # a driver took it and is about to start it
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"  # `end` says how


@dataclass(frozen=True)
class JobView:
    state: JobState
    driver_id: str | None = None
    end: JobFinished | None = None


def job_status(store: ObjectStore, clock: Clock, job_id: str, bounds: SpoolBounds) -> JobView:
    """The job's state. A job whose driver died, or whose request is gone without an end, is
    reported FAILED_TRANSIENT here (the first record of its end stands)."""
    end = finished(store, job_id)
    if end is not None:
        return JobView(JobState.FINISHED, end.driver_id, end)
    found = store.read(names.submitted_name(job_id))
    if found is None:
        return JobView(JobState.UNKNOWN)
    submitted = Submitted.decode(found.data, found.name)
    now = clock.now()
    started = read_started(store, job_id)
    if started is not None:
        record = read_driver(store, started.driver_id)
        lost = claimant_lost(record, started.instance, started.started_at, now, bounds)
        if lost is None:
            return JobView(JobState.RUNNING, started.driver_id)
        return ended(report(store, transient(clock, job_id, started.driver_id, lost)))
    read = store.read(submitted.request)
    if read is None:
        late = finished(store, job_id)  # ended between the two reads
        if late is not None:
            return ended(late)
        if now - submitted.submitted_at <= bounds.stale_after:
            return JobView(JobState.QUEUED)  # its submit may still be writing it
        return lose(store, clock, submitted)
    request = decoded_request(read)
    if request is None or request.state is RequestState.QUEUED:
        return JobView(JobState.QUEUED)  # an unreadable request: the next driver rejects it
    if request.state in (RequestState.WITHDRAWN, RequestState.LOST):
        settle_request(store, clock, read, request, "withdrawn")
        return ended(finished(store, job_id))
    lost = claimant_lost(
        read_driver(store, request.driver_id or ""), request.instance, request.claimed_at or now, now, bounds
    )
    if lost is None:
        return JobView(JobState.CLAIMED, request.driver_id)
    settle_request(store, clock, read, request, lost)
    return ended(finished(store, job_id))


def lose(store: ObjectStore, clock: Clock, submitted: Submitted) -> JobView:
    """A job whose request is gone although no driver started it: LOST is created where the request
    was, so that a submit whose create of it is still under way fails, then the job is reported
    FAILED_TRANSIENT and the LOST request removed (a driver that claims a request whose job has
    ended does not run it)."""
    lost = SpoolRequest(
        job_id=submitted.job_id,
        table=submitted.table,
        submitted_at=submitted.submitted_at,
        state=RequestState.LOST,
    )
    try:
        generation = store.create(submitted.request, lost.encode())
    except PreconditionFailed:
        return JobView(JobState.QUEUED)  # it was created meanwhile: queued after all
    settle_request(store, clock, StoredObject(submitted.request, generation, lost.encode()), lost, "lost")
    return ended(finished(store, submitted.job_id))


def ended(end: JobFinished | None) -> JobView:
    return JobView(JobState.FINISHED, None if end is None else end.driver_id, end)


def read_started(store: ObjectStore, job_id: str) -> JobStarted | None:
    found = store.read(names.started_name(job_id))
    if found is None:
        return None
    try:
        return JobStarted.decode(found.data, found.name)
    except ConfigError:
        return None


@dataclass(frozen=True)
class Withdrawal:
    withdrawn: bool  # True: the job never runs
    driver_id: str | None = None  # the driver that took it first
    end: JobFinished | None = None  # how it ended, when it had


def withdraw(store: ObjectStore, clock: Clock, job_id: str, *, reason: str | None = None) -> Withdrawal:
    """Take a queued job back. Compare-and-swap QUEUED -> WITHDRAWN against a driver's QUEUED ->
    CLAIMED: either the withdraw wins and no driver runs the job, or the claim wins and this says
    which driver took it. With a `reason` (no driver started in time), the job's end is a transient
    failure naming it rather than a cancel."""
    found = store.read(names.submitted_name(job_id))
    if found is None:
        return Withdrawal(withdrawn=False)
    submitted = Submitted.decode(found.data, found.name)
    while True:
        end = finished(store, job_id)
        if end is not None:
            return Withdrawal(_withdrawn(end, reason), end.driver_id, end)
        read = store.read(submitted.request)
        if read is None:
            started = read_started(store, job_id)
            return Withdrawal(False, None if started is None else started.driver_id, finished(store, job_id))
        request = decoded_request(read)
        if request is not None and request.state is RequestState.CLAIMED:
            return Withdrawal(withdrawn=False, driver_id=request.driver_id)
        if request is None:  # unreadable: it can never run; withdrawing it removes it
            discard(store, read.name, read.generation)
            report(store, JobFinished(job_id=job_id, outcome=Outcome.WITHDRAWN, finished_at=clock.now()))
            continue
        if request.state is RequestState.QUEUED:
            update = {"state": RequestState.WITHDRAWN, "reason": reason, "nonce": new_nonce()}
            request = request.model_copy(update=update)
            try:
                generation = store.replace(read.name, request.encode(), if_generation=read.generation)
            except PreconditionFailed:
                continue  # claimed (or withdrawn) meanwhile: read again
            read = type(read)(read.name, generation, request.encode())
        settle_request(store, clock, read, request, "withdrawn")


def request_stop(store: ObjectStore, clock: Clock, job_id: str) -> None:
    """Ask the driver that runs the job to stop it before its next batch (`jobs/<job>/stop.json`,
    created once: a repeated cancel changes nothing)."""
    try:
        store.create(names.stop_name(job_id), StopRequest(job_id=job_id, requested_at=clock.now()).encode())
    except PreconditionFailed:
        pass


def _withdrawn(end: JobFinished, reason: str | None) -> bool:
    """Whether the job ended without any driver running it: withdrawn by a cancel, or (for a withdraw
    with a `reason`) a transient failure no driver reported, such as another poller's withdraw."""
    if end.outcome is Outcome.WITHDRAWN:
        return True
    return reason is not None and end.outcome is Outcome.FAILED_TRANSIENT and end.driver_id is None


def start_overdue(
    store: ObjectStore, clock: Clock, job_id: str, bounds: SpoolBounds, timeout: timedelta
) -> str | None:
    """Why the queued job has waited longer than `timeout` with no driver running to serve it
    (drivers announced but never started, or none); None while a running driver, or a leaving one
    that lists the queue after it, will take it, or before the timeout."""
    queued_at = _queued_at(store, job_id)
    if queued_at is None:
        return None
    now = clock.now()
    if now - queued_at <= timeout:
        return None
    records = reap(store, clock, bounds)
    if any(r.state is DriverState.RUNNING and taking(r, now, bounds) for r in records):
        return None
    if listed_by_leaving(records, queued_at, now, bounds):
        return None
    tried = sorted((r for r in records if r.started_at >= queued_at), key=lambda r: r.started_at)
    last = (
        f"; the last driver launched for it, batch {tried[-1].batch}, "
        f"{death(tried[-1], now, bounds) or 'has not started yet'}"
        if tried
        else ""
    )
    return (
        f"no warm driver started within DRIVER_START_TIMEOUT_SECONDS ({timeout.total_seconds():.0f} s) of "
        f"the job's submit{last} (Dataproc quota, permissions or capacity: see the driver_launch_failed "
        "log lines)"
    )
