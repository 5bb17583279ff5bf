"""What the tests of the warm drivers' spool in the bucket share: a clock they move, a store, the
spool's bounds, and a job that counts its runs."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime, timedelta

from turnstile.state.spooldriver import SpoolDriver
from turnstile.state.spoolrecords import Outcome, SpoolBounds, SpoolRequest
from turnstile.store.port import ObjectStore

BOUNDS = SpoolBounds(stale_after=timedelta(minutes=10), start_within=timedelta(minutes=5))


class ManualClock:
    def __init__(self) -> None:
        self.current = datetime(2026, 6, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            self.current += timedelta(microseconds=1)  # two calls never tell the same time
            return self.current

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self.current += timedelta(seconds=seconds)


class Runs:
    """The jobs a driver ran, each counted."""

    def __init__(self) -> None:
        self.count: Counter[str] = Counter()
        self.order: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: SpoolRequest, stop_requested: object = None) -> tuple[Outcome, str | None]:
        with self._lock:
            self.count[request.job_id] += 1
            self.order.append(request.job_id)
        return Outcome.SUCCEEDED, None


def driver(store: ObjectStore, clock: ManualClock, driver_id: str = "d1", **kwargs: str) -> SpoolDriver:
    return SpoolDriver(store, clock, driver_id, batch=f"batch-{driver_id}", bounds=BOUNDS, **kwargs)
