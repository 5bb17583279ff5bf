"""A warm driver's loop over the spool in the bucket: take requests in order, run up to its slots'
worth side by side, keep its heartbeat and look for cancels while they run, leave when told to,
serving on the way out every request it listed after saying LEAVING."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.state.spooldriver import Claimed, Fenced, SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolRequest
from turnstile.state.spoolslots import Slots, ThreadSlots

log = logs.get("spool")

Run = Callable[[SpoolRequest, Callable[[], bool]], tuple[Outcome, str | None]]
"""Runs one job: its outcome (SUCCEEDED or FAILED) and error. The second argument says whether a
cancel asked the job to stop; the job looks at it before each batch."""
ShouldLeave = Callable[[datetime | None, datetime], str | None]
"""Given when the driver went idle (None: it runs a job, or has not found the queue empty since it
started or last ran one) and now: why it leaves (`driver_policy`), or None to stay."""


def serve(
    driver: SpoolDriver,
    run: Run,
    should_leave: ShouldLeave,
    clock: Clock,
    poll_seconds: float,
    *,
    slots: Slots | None = None,
) -> str:
    """Serve until `should_leave` says why; returns that reason (or why the driver had to stop)."""
    slots = slots or ThreadSlots(1)
    if not driver.register(slots.size):
        refused = f"another start of driver {driver.driver_id} holds its record, or the id has ended"
        _ended(driver, "driver_not_started", refused)
        return refused
    log.info(
        f"warm driver {driver.driver_id} ({driver.batch}) started: it takes requests, {slots.size} at once",
        extra={"event": "driver_started", "driver": driver.driver_id, "batch": driver.batch},
    )
    jobs = Running(driver, clock, slots, run)
    # Idle only once it finds the queue empty with nothing running: the requests it was launched
    # for, and those queued while it ran jobs, are taken before the policy is asked to stay idle.
    idle_since: datetime | None = None
    try:
        while True:
            jobs.look()
            leaving = should_leave(idle_since, clock.now())
            if leaving is not None:
                for name in driver.leave(leaving):
                    while slots.busy >= slots.size:
                        jobs.wait(poll_seconds)
                    claimed = driver.claim(name)
                    if claimed is not None:
                        jobs.start(claimed)
                while slots.busy:
                    jobs.wait(poll_seconds)
                driver.gone()
                _ended(driver, "driver_left", leaving)
                return leaving
            if slots.busy >= slots.size:
                jobs.wait(poll_seconds)
                continue
            if idle_since is not None:
                clock.sleep(poll_seconds)
            claimed = driver.take()
            if claimed is not None:
                jobs.start(claimed)
                idle_since = None
            elif slots.busy:  # look again when one ends, or a poll later: other tables may queue
                jobs.wait(poll_seconds)
            else:
                idle_since = idle_since or clock.now()
    except Fenced as exc:
        slots.join()  # its jobs end first: whoever fenced it reported them, their ends change nothing
        _ended(driver, "driver_fenced", str(exc))
        return str(exc)


class Running:
    """The jobs a driver runs now, each with the stop a cancel may ask of it. Looked after from
    the serving loop once a heartbeat interval: the heartbeat, and one stat per running job."""

    def __init__(self, driver: SpoolDriver, clock: Clock, slots: Slots, run: Run) -> None:
        self.driver, self.clock, self.slots, self.run = driver, clock, slots, run
        # Fresh well within the stale bound, without a write per poll (GCS allows one a second per object).
        self.every = driver.bounds.stale_after / 4
        self._stops: dict[str, threading.Event] = {}
        self._mutex = threading.Lock()
        self._looked = clock.now()

    def start(self, claimed: Claimed) -> None:
        job, asked = claimed.request.job_id, threading.Event()
        with self._mutex:
            self._stops[job] = asked

        def work() -> None:
            try:
                run_one(self.driver, claimed, self.run, asked.is_set)
            finally:
                with self._mutex:
                    self._stops.pop(job, None)

        self.slots.start(f"job {job}", work)

    def look(self) -> None:
        """Raise what ended a job's thread (`Fenced`, a dead Spark context), beat, look for stops."""
        self.slots.check()
        self.driver.heartbeat(unless_within=self.every)
        now = self.clock.now()
        if now - self._looked < self.every:
            return
        self._looked = now
        with self._mutex:
            running = list(self._stops.items())
        for job, asked in running:
            if not asked.is_set() and self.driver.stop_asked(job):
                asked.set()

    def wait(self, seconds: float) -> None:
        """Until a job ends, or `seconds` pass (at most a heartbeat interval), then look after them."""
        self.slots.wait(min(seconds, self.every.total_seconds()))
        self.look()


def _ended(driver: SpoolDriver, event: str, reason: str) -> None:
    """Why a driver stopped (or never started): INFO when it left as its policy said, WARNING when
    it was fenced (declared dead while alive, or its record taken) or could not register."""
    served = driver.record.jobs_served if driver.record is not None else 0
    log.log(
        logging.INFO if event == "driver_left" else logging.WARNING,
        f"warm driver {driver.driver_id} ({driver.batch}) stopped after {served} jobs: {reason}",
        extra={
            "event": event,
            "driver": driver.driver_id,
            "batch": driver.batch,
            "reason": reason,
            "jobs_served": served,
        },
    )


def run_one(
    driver: SpoolDriver, claimed: Claimed, run: Run, stop_requested: Callable[[], bool] = lambda: False
) -> None:
    if not driver.start(claimed):
        return
    try:
        outcome, error = run(claimed.request, stop_requested)
        if stop_requested() and outcome is not Outcome.SUCCEEDED:  # it stopped at a batch boundary
            outcome, error = Outcome.CANCELLED, error or "cancelled: stopped at a batch boundary"
    except Exception as exc:  # the job's own failure, whatever it is: recorded, the driver goes on
        outcome, error = Outcome.FAILED, f"{type(exc).__name__}: {exc}"
    driver.finish(claimed, outcome, error)
