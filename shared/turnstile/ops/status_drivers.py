"""`turnstile status`: the warm drivers of the deployment and their queue, from the spool in the
bucket (`_turnstile/driver/`, in the state bucket when there is one; docs/DRIVER.md).

Read only: what a driver record says, plus whether it counts as dead by the spool's own rule
(`spoolrecords.death`), so `status` calls a driver dead exactly when the next submit would start
another. The cost so far is modelled: the driver's age at `DRIVER_DCU`, as Dataproc Serverless bills
its smallest batch (a 4-vCPU driver and two 4-vCPU executors, billed whether busy or idle); on
EMR Serverless the same figure is vCPU-seconds (`driver_policy.emr_costs` models a 12-vCPU run).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from turnstile.names import driverspool as names
from turnstile.state.spoolreap import drivers
from turnstile.state.spoolrecords import DriverState, SpoolBounds, death
from turnstile.store.port import ObjectStore

DRIVER_DCU = 12.0


@dataclass(frozen=True)
class DriverView:
    driver_id: str
    batch: str  # the Dataproc batch id or EMR job run id that runs it
    state: str  # STARTING, RUNNING, LEAVING, GONE, DEAD; a stale one reads DEAD with its reason
    age_seconds: float  # since it started (or was announced)
    jobs_served: int
    serving: str | None  # the jobs it runs now, comma-separated (from their requests' names)
    busy_slots: int  # how many jobs it runs now
    slots: int  # how many it runs at once (DRIVER_SLOTS)
    idle_seconds: float | None  # how long it has waited for work; None while it works or ended
    heartbeat_age_seconds: float
    reason: str | None  # why it left, or why it is dead
    dcu_seconds: float  # modelled: its age (to its last heartbeat once ended) x DRIVER_DCU


@dataclass(frozen=True)
class DriversView:
    drivers: tuple[DriverView, ...]
    queued: int  # requests no driver runs yet

    @property
    def empty(self) -> bool:
        return not self.drivers and not self.queued

    def to_json(self) -> dict[str, Any]:
        return {"drivers": [asdict(d) for d in self.drivers], "queued": self.queued}


def read(store: ObjectStore, now: datetime, bounds: SpoolBounds | None = None) -> DriversView:
    """The drivers and the queue: one listing of each folder, one read per driver record."""
    bounds = bounds or SpoolBounds()
    found = []
    serving: set[str] = set()
    for driver in drivers(store):
        record = driver.record
        serving.update(record.serving)
        dead = death(record, now, bounds)
        state = DriverState.DEAD if dead is not None else record.state
        ended = state in (DriverState.GONE, DriverState.DEAD)
        until = record.heartbeat_at if ended else now
        idle = None
        if not ended and not record.serving and record.idle_since is not None:
            idle = (now - record.idle_since).total_seconds()
        found.append(
            DriverView(
                driver_id=record.driver_id,
                batch=record.batch,
                state=state.value,
                age_seconds=(now - record.started_at).total_seconds(),
                jobs_served=record.jobs_served,
                serving=", ".join(str(names.job_of(name)) for name in record.serving) or None,
                busy_slots=len(record.serving),
                slots=record.slots,
                idle_seconds=idle,
                heartbeat_age_seconds=(now - record.heartbeat_at).total_seconds(),
                reason=dead or record.reason,
                dcu_seconds=max((until - record.started_at).total_seconds(), 0.0) * DRIVER_DCU,
            )
        )
    queued = sum(1 for info in store.list_entries(names.REQUESTS) if info.name not in serving)
    return DriversView(tuple(sorted(found, key=lambda d: d.driver_id)), queued)
