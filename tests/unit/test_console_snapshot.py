"""The console's background reading (`ui/snapshot.py`): the first page waits for the first reading,
readings are renewed every `every` seconds, none older than `max_age` is served, a failed first
reading is the page's error, and nobody asking for `idle` seconds stops the readings."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime

import pytest

from turnstile.ops.lineage_graph import Graph
from turnstile.ui.snapshot import Reading, Snapshot


class Reads:
    def __init__(self, seconds: float = 0.0, fail: bool = False) -> None:
        self.count = itertools.count(1)
        self.done = 0
        self.seconds = seconds
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self) -> Reading:
        time.sleep(self.seconds)
        with self.lock:
            self.done = next(self.count)
        if self.fail:
            raise RuntimeError("the bucket refused")
        at = datetime(2024, 5, 1, tzinfo=UTC)
        return Reading((), Graph((), (), (f"reading {self.done}",)), at, 0.0, 0.0)


def number(reading: Reading) -> int:
    return int(reading.graph.errors[0].split()[1])


def test_the_first_page_waits_for_the_first_reading_then_readings_are_renewed() -> None:
    reads = Reads(seconds=0.2)
    snapshot = Snapshot(reads, every=0.3, max_age=60)
    first = snapshot.current()
    assert number(first) == 1 and first.seconds >= 0.2
    assert number(snapshot.current()) == 1  # young enough: served as it is
    deadline = time.monotonic() + 10
    while number(snapshot.current()) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    snapshot.stop()


def test_a_reading_older_than_its_bound_is_not_served() -> None:
    reads = Reads()
    snapshot = Snapshot(reads, every=3600, max_age=0.2)
    assert number(snapshot.current()) == 1
    time.sleep(0.3)
    renewed = snapshot.current()  # waited for a reading begun after it asked
    assert number(renewed) == 2 and renewed.age() < 0.2
    assert snapshot.recent() is not None
    time.sleep(0.3)
    assert snapshot.recent() is None  # too old, and nothing read for it
    snapshot.stop()


def test_a_failed_first_reading_is_the_pages_error() -> None:
    snapshot = Snapshot(Reads(fail=True), every=3600, max_age=30)
    with pytest.raises(RuntimeError, match="the bucket refused"):
        snapshot.current()
    snapshot.stop()


def test_readings_stop_when_nobody_asks_and_start_again_on_the_next_page() -> None:
    reads = Reads()
    snapshot = Snapshot(reads, every=0.05, max_age=60, idle=0.3)
    snapshot.current()
    time.sleep(0.8)
    stopped_at = reads.done
    time.sleep(0.3)
    assert reads.done == stopped_at  # no reading since
    assert number(snapshot.current()) == stopped_at  # still young enough: served
    deadline = time.monotonic() + 10
    while reads.done == stopped_at:  # and reading again
        assert time.monotonic() < deadline
        time.sleep(0.05)
    snapshot.stop()
