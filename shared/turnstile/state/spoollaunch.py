"""Launching warm drivers on the spool in the bucket: the deployment's driver sequence (so that
submitters that race start one driver), a driver whose batch ended declared dead, and the stay-up
policy's history handed from a driver to its successor.

The sequence is one object, `sequence.json`, moved on by compare-and-swap: of the submitters that
read number N and found no driver taking requests, the one whose write of N + 1 lands launches
driver N + 1 (a new sequence starts from the clock's second, so that a sequence removed by hand
never names a batch again); the others see their write fail and leave the launch to it. A launch that stops
between the two writes leaves no driver announced, or one announced that never starts (dead after
`start_within`): the next submit or status read that finds no driver taking requests moves the
sequence on again (docs/DRIVER.md, "The warm driver on Dataproc").
"""

from __future__ import annotations

from pydantic import AwareDatetime, Field

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError, PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state.records import Record, new_nonce
from turnstile.state.spoolreap import Driver, decoded_driver, reap_one
from turnstile.state.spoolrecords import DriverRecord, DriverState, SpoolBounds
from turnstile.store.port import ObjectStore

log = logs.get("spool")


class DriverSequence(Record):
    """`sequence.json`: the number of the deployment's last driver launch."""

    number: int = Field(ge=0)
    advanced_at: AwareDatetime
    nonce: str = Field(default_factory=new_nonce)


def next_driver(store: ObjectStore, clock: Clock) -> int | None:
    """Move the driver sequence on by one: the number this caller launches, or None when another
    caller moved it meanwhile (that one launches).

    A sequence that is absent (new, or removed by hand) or unreadable starts again from the clock's
    second: above every number launched before, as long as the deployment launched fewer drivers
    than seconds went by, so a batch id (which names one batch forever) is never used twice."""
    found = store.read(names.SEQUENCE)
    restart = max(1, int(clock.now().timestamp()))
    number = restart
    if found is not None:
        try:
            number = DriverSequence.decode(found.data, found.name).number + 1
        except ConfigError as exc:
            log.warning(
                f"{exc}; the driver sequence starts again at {restart}",
                extra={"event": "driver_sequence_unreadable"},
            )
    advanced = DriverSequence(number=number, advanced_at=clock.now()).encode()
    try:
        if found is None:
            store.create(names.SEQUENCE, advanced)
        else:
            store.replace(names.SEQUENCE, advanced, if_generation=found.generation)
    except PreconditionFailed:
        return None
    return number


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
