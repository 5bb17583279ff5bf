"""A warm driver's loop over the spool in the bucket: take requests in order, run each, leave when
told to, serving on the way out every request it listed after saying LEAVING."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from turnstile.core import logs
from turnstile.core.clock import Clock
from turnstile.state.spooldriver import Claimed, Fenced, SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolRequest

log = logs.get("spool")

Run = Callable[[SpoolRequest], tuple[Outcome, str | None]]
"""Runs one job: its outcome (SUCCEEDED or FAILED) and error."""
ShouldLeave = Callable[[datetime | None, datetime], str | None]
"""Given when the driver went idle (None: it has not found the queue empty since it started or
last ran a job) and now: why it leaves (`driver_policy`), or None to stay."""


def serve(driver: SpoolDriver, run: Run, should_leave: ShouldLeave, clock: Clock, poll_seconds: float) -> str:
    """Serve until `should_leave` says why; returns that reason (or why the driver had to stop)."""
    if not driver.register():
        refused = f"another start of driver {driver.driver_id} holds its record, or the id has ended"
        _ended(driver, "driver_not_started", refused)
        return refused
    log.info(
        f"warm driver {driver.driver_id} ({driver.batch}) started: it takes requests",
        extra={"event": "driver_started", "driver": driver.driver_id, "batch": driver.batch},
    )
    # Idle only once it finds the queue empty: the requests it was launched for, and those queued
    # while it ran a job, are taken before the policy is asked whether to stay idle.
    idle_since: datetime | None = None
    # Fresh well within the stale bound, without a write per poll (GCS allows one a second per object).
    beat_every = driver.bounds.stale_after / 4
    try:
        while True:
            driver.heartbeat(unless_within=beat_every)
            leaving = should_leave(idle_since, clock.now())
            if leaving is not None:
                for name in driver.leave(leaving):
                    claimed = driver.claim(name)
                    if claimed is not None:
                        run_one(driver, claimed, run)
                driver.gone()
                _ended(driver, "driver_left", leaving)
                return leaving
            if idle_since is not None:
                clock.sleep(poll_seconds)
            claimed = driver.take()
            if claimed is None:
                idle_since = idle_since or clock.now()
                continue
            run_one(driver, claimed, run)
            idle_since = None
    except Fenced as exc:
        _ended(driver, "driver_fenced", str(exc))
        return str(exc)


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


@contextmanager
def heartbeating(driver: SpoolDriver, every_seconds: float) -> Iterator[None]:
    """Keep the driver's heartbeat from a thread while a job runs: a job longer than the stale
    bound must not make its driver look dead. A failed heartbeat (`Fenced`) stops the beating; the
    job's end is then recorded by whoever declared the driver dead, and the loop stops after it."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(every_seconds):
            try:
                driver.heartbeat()
            except Fenced:
                return

    beating = threading.Thread(target=beat, name=f"heartbeat {driver.driver_id}", daemon=True)
    beating.start()
    try:
        yield
    finally:
        stop.set()
        beating.join()


def run_one(driver: SpoolDriver, claimed: Claimed, run: Run) -> None:
    if not driver.start(claimed):
        return
    try:
        outcome, error = run(claimed.request)
    except Exception as exc:  # the job's own failure, whatever it is: recorded, the driver goes on
        outcome, error = Outcome.FAILED, f"{type(exc).__name__}: {exc}"
    driver.finish(claimed, outcome, error)
