"""A warm driver's life on the spool in the bucket: register, take requests in order, run each (its
heartbeat kept from a thread meanwhile), and leave when the stay-up policy (`jobs.driver_policy`)
says so, handing the policy's history to its successor (`history.json`).

Pure of Spark: the job is the `Run` passed in (`entrypoints.dataproc_driver` runs it in the
driver's Spark session); the store and the clock are passed in too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
from turnstile.state.spoolserve import heartbeating, serve
from turnstile.store.port import ObjectStore

log = logs.get("driver")


def dataproc_costs(max_idle_seconds: float, max_lifetime_seconds: float) -> PolicyCosts:
    """Dataproc Serverless's prices (docs/DRIVER.md, "Parameters") with the deployment's bounds."""
    return PolicyCosts(
        dcu=12,
        idle_dcu=12,
        startup_seconds=60,
        min_billed_seconds=60,
        max_idle_seconds=max_idle_seconds,
        max_lifetime_seconds=max_lifetime_seconds,
    )


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
        view = DriverView(started_at=self.started_at, idle_since=idle, awaited=bool(self.awaited))
        decision = stay_decision(view, self.history, self.costs, now.timestamp())
        return decision.reason if isinstance(decision, Leave) else None

    def record(self, left_after: float) -> PolicyHistory:
        h = self.history
        return PolicyHistory(
            gaps=h.gaps, shortfall=h.shortfall, finished_at=h.finished_at, left_after=left_after
        )


RunStoppable = Callable[[SpoolRequest, Callable[[], bool]], tuple[Outcome, str | None]]
"""Runs one job: its outcome and error. The second argument says whether a cancel asked the job to
stop; the job looks at it before each batch."""


@contextmanager
def stop_watch(store: ObjectStore, job_id: str, every_seconds: float) -> Iterator[threading.Event]:
    """Set while the job runs once a cancel asked it to stop (`jobs/<job>/stop.json`), looked for
    every `every_seconds` from a thread: one stat a heartbeat, nothing per batch."""
    asked, done = threading.Event(), threading.Event()

    def watch() -> None:
        while not done.wait(every_seconds):
            if store.stat(names.stop_name(job_id)) is not None:
                asked.set()
                return

    watching = threading.Thread(target=watch, name=f"stop watch {job_id}", daemon=True)
    watching.start()
    try:
        yield asked
    finally:
        done.set()
        watching.join()


def serve_driver(
    store: ObjectStore,
    clock: Clock,
    driver_id: str,
    run: RunStoppable,
    costs: PolicyCosts,
    *,
    poll_seconds: float,
    bounds: SpoolBounds | None = None,
) -> str:
    """Serve the spool as driver `driver_id` until the policy says to leave; why it left."""
    bounds = bounds or SpoolBounds()
    driver = SpoolDriver(store, clock, driver_id, batch=driver_id, bounds=bounds)
    policy = StayUp.from_record(costs, clock.now().timestamp(), load_history(store))
    beat_every = max(bounds.stale_after.total_seconds() / 4, 0.1)

    def run_request(request: SpoolRequest) -> tuple[Outcome, str | None]:
        policy.arrived(request)
        started = clock.now()
        log.info(
            f"driver {driver_id} runs job {request.job_id} ({request.table})",
            extra={"event": "driver_job", "driver": driver_id, "job_id": request.job_id},
        )
        try:
            with heartbeating(driver, beat_every), stop_watch(store, request.job_id, beat_every) as asked:
                outcome, error = run(request, asked.is_set)
            if asked.is_set() and outcome is not Outcome.SUCCEEDED:  # it stopped at a batch boundary
                return Outcome.CANCELLED, error or "cancelled: stopped at a batch boundary"
            return outcome, error
        finally:
            policy.job_seconds = (clock.now() - started).total_seconds()

    left_after: list[float] = []

    def should_leave(idle_since: datetime | None, now: datetime) -> str | None:
        reason = policy.should_leave(idle_since, now)
        if reason is not None:
            left_after.append(0.0 if idle_since is None else (now - idle_since).total_seconds())
        return reason

    reason = serve(driver, run_request, should_leave, clock, poll_seconds)
    if left_after:  # it left by the policy: after the requests it served on its way out
        store.write(names.HISTORY, policy.record(left_after[0]).encode())
    log.info(f"driver {driver_id} leaves: {reason}", extra={"event": "driver_left", "driver": driver_id})
    return reason
