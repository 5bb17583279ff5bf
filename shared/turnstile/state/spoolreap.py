"""The spool's repairs: record a job's end once, declare a stale driver dead and report the jobs it
held, remove what ended. Each write is conditional, so two repairers (or a repairer and a driver
that was only slow) never both win; every step is safe to repeat after a crash.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state.records import new_nonce
from turnstile.state.spoolrecords import (
    DriverRecord,
    DriverState,
    JobFinished,
    Outcome,
    RequestState,
    SpoolBounds,
    SpoolRequest,
    claimant_lost,
    death,
    prunable,
)
from turnstile.store.port import ObjectStore, StoredObject

log = logs.get("spool")
UNREADABLE_AT = datetime(1970, 1, 1, tzinfo=UTC)  # the end of a job whose end record is unreadable


def decoded_request(found: StoredObject) -> SpoolRequest | None:
    try:
        return SpoolRequest.decode(found.data, found.name)
    except ConfigError:
        return None


def decoded_driver(found: StoredObject) -> DriverRecord | None:
    try:
        return DriverRecord.decode(found.data, found.name)
    except ConfigError:
        return None


def read_driver(store: ObjectStore, driver_id: str) -> DriverRecord | None:
    try:
        found = store.read(names.driver_name(driver_id))
    except ValueError:
        return None  # not a driver id
    return None if found is None else decoded_driver(found)


def orphan(
    store: ObjectStore, clock: Clock, found: StoredObject, request: SpoolRequest, bounds: SpoolBounds
) -> None:
    """A request another driver claimed: removed if its job's end is recorded (its driver stopped
    before removing it), settled if that driver can no longer end it; else left to it."""
    if finished(store, request.job_id) is not None:
        discard(store, found.name, found.generation)
        return
    now = clock.now()
    record = read_driver(store, request.driver_id or "")
    lost = claimant_lost(record, request.instance, request.claimed_at or now, now, bounds)
    if lost is not None:
        settle_request(store, clock, found, request, lost)


def finished(store: ObjectStore, job_id: str) -> JobFinished | None:
    found = store.read(names.finished_name(job_id))
    if found is None:
        return None
    try:
        return JobFinished.decode(found.data, found.name)
    except ConfigError:
        return JobFinished(
            job_id=job_id,
            outcome=Outcome.FAILED_TRANSIENT,
            error=f"{found.name} holds no record turnstile wrote",
            finished_at=UNREADABLE_AT,
        )


def report(store: ObjectStore, end: JobFinished) -> JobFinished:
    """Record a job's end if none is recorded; the record that stands (the first writer's)."""
    try:
        store.create(names.finished_name(end.job_id), end.encode())
    except PreconditionFailed as exc:
        if exc.found is not None:
            try:
                return JobFinished.decode(exc.found.data, exc.found.name)
            except ConfigError:
                return end
        return report(store, end)  # removed in between (by hand): try again
    if end.outcome is Outcome.FAILED_TRANSIENT:
        log.warning(
            f"spool job {end.job_id} failed transiently: {end.error}",
            extra={"event": "spool_job_lost", "job_id": end.job_id, "driver": end.driver_id},
        )
    return end


def discard(store: ObjectStore, name: str, generation: int) -> None:
    """Delete what was read at `generation`; a newer object of the name (or none) is left as is."""
    try:
        store.delete(name, if_generation=generation)
    except PreconditionFailed:
        pass


def transient(clock: Clock, job_id: str, driver_id: str | None, why: str) -> JobFinished:
    return JobFinished(
        job_id=job_id,
        outcome=Outcome.FAILED_TRANSIENT,
        driver_id=driver_id,
        error=why,
        finished_at=clock.now(),
    )


def lost_request(name: str) -> str:
    return (
        f"its request {name} was gone (removed by hand, or its submit never finished) and no driver "
        "started it"
    )


def settle_request(
    store: ObjectStore, clock: Clock, found: StoredObject, request: SpoolRequest, why: str
) -> None:
    """A request whose driver can no longer end it, a withdrawn one or a lost one: its end is
    recorded (the first record stands), then the request is removed at the generation read."""
    if request.state is RequestState.WITHDRAWN and request.reason:
        end = transient(clock, request.job_id, None, request.reason)
    elif request.state is RequestState.WITHDRAWN:
        end = JobFinished(job_id=request.job_id, outcome=Outcome.WITHDRAWN, finished_at=clock.now())
    elif request.state is RequestState.LOST:
        end = transient(clock, request.job_id, None, lost_request(found.name))
    else:
        end = transient(clock, request.job_id, request.driver_id, why)
    report(store, end)
    discard(store, found.name, found.generation)


@dataclass(frozen=True)
class Driver:
    """A driver record as read, with its generation."""

    name: str
    generation: int
    record: DriverRecord


def drivers(store: ObjectStore) -> list[Driver]:
    """Every readable driver record (an unreadable one counts as no driver)."""
    found = []
    for info in store.list_objects(names.DRIVERS):
        read = store.read(info.name)
        record = None if read is None else decoded_driver(read)
        if read is not None and record is not None:
            found.append(Driver(info.name, read.generation, record))
    return found


def reap(store: ObjectStore, clock: Clock, bounds: SpoolBounds) -> list[DriverRecord]:
    """Declare stale drivers dead (compare-and-swap: the driver's own next write then fails),
    report the jobs each held, prune records of drivers that ended long ago. The records after it."""
    kept = []
    for driver in drivers(store):
        record = reap_one(store, clock, driver, bounds)
        if record is not None:
            kept.append(record)
    return kept


def reap_one(store: ObjectStore, clock: Clock, driver: Driver, bounds: SpoolBounds) -> DriverRecord | None:
    now = clock.now()
    record, generation = driver.record, driver.generation
    reason = death(record, now, bounds)
    try:
        if reason is not None and record.state is not DriverState.DEAD:
            record = record.model_copy(
                update={"state": DriverState.DEAD, "reason": reason, "nonce": new_nonce()}
            )
            generation = store.replace(driver.name, record.encode(), if_generation=generation)
            log.warning(
                f"spool driver {record.driver_id} ({record.batch}) is dead: {reason}",
                extra={"event": "spool_driver_dead", "driver": record.driver_id, "batch": record.batch},
            )
        if record.state in (DriverState.DEAD, DriverState.GONE) and record.serving:
            for request in record.serving:
                release(store, clock, record, request)
            record = record.model_copy(update={"serving": (), "nonce": new_nonce()})
            generation = store.replace(driver.name, record.encode(), if_generation=generation)
        if prunable(record, now, bounds):
            store.delete(driver.name, if_generation=generation)
            return None
    except PreconditionFailed:
        return None  # it moved meanwhile (a heartbeat, another repairer): the next reading decides
    return record


def release(store: ObjectStore, clock: Clock, record: DriverRecord, request: str) -> None:
    """The request a dead (or departed) driver named: if it is still claimed by that driver, its job
    is reported failed transiently and the request removed; otherwise it is not this driver's."""
    found = store.read(request)
    claim = None if found is None else decoded_request(found)
    if found is None or claim is None or claim.state is not RequestState.CLAIMED:
        return
    if (claim.driver_id, claim.instance) != (record.driver_id, record.instance):
        return
    why = f"driver {record.driver_id} ({record.batch}) ended while it ran"
    settle_request(store, clock, found, claim, f"{why}: {record.reason}" if record.reason else why)
