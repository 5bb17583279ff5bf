"""A warm driver's loop over the spool in the bucket: take requests in order, run each, leave when
told to, serving on the way out every request it listed after saying LEAVING."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from turnstile.core.clock import Clock
from turnstile.state.spooldriver import Claimed, Fenced, SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolRequest

Run = Callable[[SpoolRequest], tuple[Outcome, str | None]]
"""Runs one job: its outcome (SUCCEEDED or FAILED) and error."""
ShouldLeave = Callable[[datetime, datetime], str | None]
"""Given when the driver went idle and now: why it leaves (`driver_policy`), or None to stay."""


def serve(driver: SpoolDriver, run: Run, should_leave: ShouldLeave, clock: Clock, poll_seconds: float) -> str:
    """Serve until `should_leave` says why; returns that reason (or why the driver had to stop)."""
    if not driver.register():
        return f"another start of driver {driver.driver_id} holds its record"
    idle_since = clock.now()
    try:
        while True:
            driver.heartbeat()
            reason = should_leave(idle_since, clock.now())
            if reason is not None:
                for name in driver.leave(reason):
                    claimed = driver.claim(name)
                    if claimed is not None:
                        run_one(driver, claimed, run)
                driver.gone()
                return reason
            claimed = driver.take()
            if claimed is None:
                clock.sleep(poll_seconds)
                continue
            run_one(driver, claimed, run)
            idle_since = clock.now()
    except Fenced as exc:
        return str(exc)


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
