"""A warm driver's life on the spool in the bucket: register, take requests in order, run them side
by side (`slots` at once, each on a thread), and leave when the stay-up policy (`jobs.driver_policy`)
says so, handing the policy's history to its successor (`history.json`).

Pure of Spark: the job is the `Run` passed in (`entrypoints.spool_driver` runs it in the
driver's Spark session); the store and the clock are passed in too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import Field

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.core.errors import ConfigError
from turnstile.jobs.driver_policy import DriverView, History, Leave, PolicyCosts, arrived, stay_decision
from turnstile.names import driverspool as names
from turnstile.state.records import Record, new_nonce
from turnstile.state.spooldriver import SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolBounds, SpoolRequest
from turnstile.state.spoolserve import Run, serve
from turnstile.state.spoolslots import ThreadSlots
from turnstile.store.port import ObjectStore

log = logs.get("driver")


class PolicyHistory(Record):
    """`history.json`: the stay-up policy's `History`, and how long the driver that wrote it stayed
    idle before it left. Written by each driver as it leaves (the last writer's stands: it guides
    the policy, it decides nothing about a job)."""

    gaps: tuple[float, ...] = ()
    shortfall: float = 0.0
    finished_at: float | None = None
    left_after: float | None = None
    nonce: str = Field(default_factory=new_nonce)


def load_history(store: ObjectStore) -> PolicyHistory:
    found = store.read(names.HISTORY)
    if found is None:
        return PolicyHistory()
    try:
        return PolicyHistory.decode(found.data, found.name)
    except ConfigError as exc:
        log.warning(f"starting with no history: {exc}", extra={"event": "driver_history_unreadable"})
        return PolicyHistory()


@dataclass
class StayUp:
    """The policy over one driver's life: its history grows with each request it takes."""

    costs: PolicyCosts
    started_at: float
    history: History
    left_after: float | None = None  # the predecessor's idle wait before it left
    job_seconds: float = 0.0  # the last job's time: what the next one is expected to take
    first: bool = field(default=True)
    awaited: set[str] = field(default_factory=set)  # tables whose next request is known to be coming
    rank: int = 0  # drivers taking requests that started before this one (extras leave first)

    @classmethod
    def from_record(cls, costs: PolicyCosts, started_at: float, record: PolicyHistory) -> StayUp:
        try:
            history = History(gaps=record.gaps, shortfall=record.shortfall, finished_at=record.finished_at)
        except ValueError:
            history = History()
        return cls(costs, started_at, history, record.left_after)

    def arrived(self, request: SpoolRequest) -> None:
        waited = self.left_after if self.first else None
        at = request.submitted_at.timestamp()
        self.history = arrived(self.history, at, self.job_seconds, waited, self.costs)
        self.first = False
        self.awaited.discard(request.table)
        if request.more_queued:
            self.awaited.add(request.table)

    def should_leave(self, idle_since: datetime | None, now: datetime) -> str | None:
        idle = None if idle_since is None else idle_since.timestamp()
        view = DriverView(
            started_at=self.started_at, idle_since=idle, awaited=bool(self.awaited), rank=self.rank
        )
        decision = stay_decision(view, self.history, self.costs, now.timestamp())
        return decision.reason if isinstance(decision, Leave) else None

    def record(self, left_after: float) -> PolicyHistory:
        h = self.history
        return PolicyHistory(
            gaps=h.gaps, shortfall=h.shortfall, finished_at=h.finished_at, left_after=left_after
        )


def serve_driver(
    store: ObjectStore,
    clock: Clock,
    driver_id: str,
    run: Run,
    costs: PolicyCosts,
    *,
    poll_seconds: float,
    slots: int = 1,
    bounds: SpoolBounds | None = None,
) -> str:
    """Serve the spool as driver `driver_id`, `slots` jobs at once, until the policy says to leave;
    why it left."""
    bounds = bounds or SpoolBounds()
    driver = SpoolDriver(store, clock, driver_id, batch=driver_id, bounds=bounds)
    policy = StayUp.from_record(costs, clock.now().timestamp(), load_history(store))
    asking = threading.Lock()  # jobs' threads tell the policy of arrivals the loop asks it about

    def run_request(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        with asking:
            policy.arrived(request)
        started = clock.now()
        log.info(
            f"driver {driver_id} runs job {request.job_id} ({request.table})",
            extra={"event": "driver_job", "driver": driver_id, "job_id": request.job_id},
        )
        try:
            return run(request, stop_requested)
        finally:
            with asking:
                policy.job_seconds = (clock.now() - started).total_seconds()

    left_after: list[float] = []

    def should_leave(idle_since: datetime | None, now: datetime) -> str | None:
        with asking:
            policy.rank = driver.rank
            reason = policy.should_leave(idle_since, now)
        if reason is not None:
            left_after.append(0.0 if idle_since is None else (now - idle_since).total_seconds())
        return reason

    reason = serve(driver, run_request, should_leave, clock, poll_seconds, slots=ThreadSlots(slots))
    if left_after:  # it left by the policy: after the requests it served on its way out
        store.write(names.HISTORY, policy.record(left_after[0]).encode())
    log.info(f"driver {driver_id} leaves: {reason}", extra={"event": "driver_left", "driver": driver_id})
    return reason
