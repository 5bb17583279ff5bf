"""Launching warm drivers on the spool in the bucket: the deployment's driver sequence (so that
submitters that race start one driver), a driver whose batch ended declared dead, and the stay-up
policy's history handed from a driver to its successor.

The sequence is one object, `sequence.json`, holding the number of the last driver launched
(`claim_launch`). A submitter reads it (N), reads the drivers again, and only if none takes requests
announces driver N + 1 (create-if-absent of its STARTING record), then moves the sequence from N to
N + 1 by compare-and-swap, then launches. Announcing before moving the sequence is what makes one
launch per need: a racing submitter that reads the moved sequence reads the drivers after it, so it
finds the announcement and launches nothing; one that read N before the move announces N + 1 too,
and one of the two creates fails. A launch that stops between the announce and the move leaves a
STARTING record that no one launches (dead after `start_within`): the next submitter that finds it
in place of N + 1 moves the sequence past it. One that stops after the move leaves the same
record, and the sequence already past it. A new sequence starts from the clock's second, so that a
sequence removed by hand never names a batch again (docs/DRIVER.md, "The warm driver on Dataproc").
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import AwareDatetime, Field

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state.records import Record, new_nonce
from turnstile.state.spoolreap import Driver, decoded_driver, read_driver, reap_one
from turnstile.state.spoolrecords import DriverRecord, DriverState, SpoolBounds, taking
from turnstile.store.port import ObjectStore, StoredObject

log = logs.get("spool")


class DriverSequence(Record):
    """`sequence.json`: the number of the deployment's last driver launch."""

    number: int = Field(ge=0)
    advanced_at: AwareDatetime
    nonce: str = Field(default_factory=new_nonce)


def claim_launch(
    store: ObjectStore,
    clock: Clock,
    bounds: SpoolBounds,
    still_needed: Callable[[], bool],
    batch_of: Callable[[int], str],
    *,
    skips: int = 3,
) -> str | None:
    """Announce the next driver and move the sequence to it: the driver id (its batch's id, from
    `batch_of(number)`) this caller now launches, or None when no launch is this caller's to make
    (`still_needed()`, read after the sequence, says a driver takes requests; or another caller
    announced or moved first). At most `skips` numbers whose launch stopped before the sequence
    moved are stepped over."""
    for _ in range(skips + 1):
        found = store.read(names.SEQUENCE)
        number = _following(found, clock)
        if not still_needed():
            return None
        driver_id = batch_of(number)
        if announce(store, clock, driver_id, driver_id):
            if _advance(store, clock, found, number):
                return driver_id
            withdraw_announcement(store, driver_id)  # the sequence moved meanwhile: its mover launches
            return None
        record = read_driver(store, driver_id)
        if record is not None and taking(record, clock.now(), bounds):
            return None  # a racing caller announced it: it launches
        # Announced by a launch that stopped before the move (now dead), or removed since: step over.
        if not _advance(store, clock, found, number):
            return None
    return None


def _following(found: StoredObject | None, clock: Clock) -> int:
    """The number after the sequence's. An absent (new, or removed by hand) or unreadable sequence
    starts again from the clock's second: above every number launched before, as long as the
    deployment launched fewer drivers than seconds went by, so a batch id (which names one batch
    forever) is never used twice."""
    restart = max(1, int(clock.now().timestamp()))
    if found is None:
        return restart
    try:
        return DriverSequence.decode(found.data, found.name).number + 1
    except ConfigError as exc:
        log.warning(
            f"{exc}; the driver sequence starts again at {restart}",
            extra={"event": "driver_sequence_unreadable"},
        )
        return restart


def _advance(store: ObjectStore, clock: Clock, found: StoredObject | None, number: int) -> bool:
    """Compare-and-swap the sequence from what was read to `number`; False when it moved meanwhile."""
    advanced = DriverSequence(number=number, advanced_at=clock.now()).encode()
    try:
        if found is None:
            store.create(names.SEQUENCE, advanced)
        else:
            store.replace(names.SEQUENCE, advanced, if_generation=found.generation)
    except PreconditionFailed:
        return False
    return True


def announce(store: ObjectStore, clock: Clock, driver_id: str, batch: str) -> bool:
    """Record a driver about to be launched, so that other submitters wait for it instead of
    starting their own; False when the id is taken (launch nothing)."""
    now = clock.now()
    record = DriverRecord(
        driver_id=driver_id, batch=batch, state=DriverState.STARTING, started_at=now, heartbeat_at=now
    )
    try:
        store.create(names.driver_name(driver_id), record.encode())
    except PreconditionFailed:
        return False
    return True


def withdraw_announcement(store: ObjectStore, driver_id: str) -> None:
    """Remove the STARTING record of a driver whose launch failed, so that the next submit starts
    another instead of waiting `start_within` for it; a record the driver took meanwhile is kept."""
    name = names.driver_name(driver_id)
    found = store.read(name)
    record = None if found is None else decoded_driver(found)
    if found is None or record is None or record.state is not DriverState.STARTING:
        return
    try:
        store.delete(name, if_generation=found.generation)
    except PreconditionFailed:
        pass


def declare_dead(
    store: ObjectStore, clock: Clock, driver_id: str, why: str, bounds: SpoolBounds
) -> DriverRecord | None:
    """A driver whose batch ended (failed, cancelled, or gone) without leaving: its record DEAD
    (compare-and-swap, so its own late write fails), the job it served reported FAILED_TRANSIENT.
    A record already GONE or DEAD is only repaired. The record after it (None: absent or moved)."""
    name = names.driver_name(driver_id)
    found = store.read(name)
    record = None if found is None else decoded_driver(found)
    if found is None or record is None:
        return None
    generation = found.generation
    if record.state not in (DriverState.GONE, DriverState.DEAD):
        record = record.model_copy(update={"state": DriverState.DEAD, "reason": why, "nonce": new_nonce()})
        try:
            generation = store.replace(name, record.encode(), if_generation=generation)
        except PreconditionFailed:
            return None  # it wrote meanwhile: the next read decides
    return reap_one(store, clock, Driver(name, generation, record), bounds)
