"""The console's background reading (`ui/snapshot.py`): the first page waits for the first reading
(within its patience; past it, it gets how far the reading has got), readings are renewed every
`every` seconds, none older than `max_age` is served, a failed first reading is the page's error,
and nobody asking for `idle` seconds stops the readings."""

from __future__ import annotations

import itertools
import threading
import time
from datetime import UTC, datetime

import pytest

from turnstile.ops.lineage_graph import Graph
from turnstile.ops.status import Progress
from turnstile.ui.snapshot import Partial, Reading, Snapshot

PATIENT = 60.0  # a page waits for the reading under way to end


class Reads:
    def __init__(self, seconds: float = 0.0, fail: bool = False) -> None:
        self.count = itertools.count(1)
        self.done = 0
        self.seconds = seconds
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self, progress: Progress) -> Reading:
        progress.found(2)
        progress.read(None)  # a folder that is no table: read, not shown
        time.sleep(self.seconds)
        progress.read(None)
        with self.lock:
            self.done = next(self.count)
        if self.fail:
            raise RuntimeError("the bucket refused")
        at = datetime(2024, 5, 1, tzinfo=UTC)
        return Reading((), Graph((), (), (f"reading {self.done}",)), at, 0.0, 0.0)


def number(reading: Reading | Partial) -> int:
    assert isinstance(reading, Reading), reading
    return int(reading.graph.errors[0].split()[1])


def test_the_first_page_waits_for_the_first_reading_then_readings_are_renewed() -> None:
    reads = Reads(seconds=0.2)
    snapshot = Snapshot(reads, every=0.3, max_age=60, patience=PATIENT)
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
    snapshot = Snapshot(reads, every=3600, max_age=0.2, patience=PATIENT)
    assert number(snapshot.current()) == 1
    time.sleep(0.3)
    renewed = snapshot.current()  # waited for a reading begun after it asked
    assert number(renewed) == 2 and renewed.age() < 0.2
    assert snapshot.recent() is not None
    time.sleep(0.3)
    assert snapshot.recent() is None  # too old, and nothing read for it
    snapshot.stop()


def test_a_failed_first_reading_is_the_pages_error() -> None:
    snapshot = Snapshot(Reads(fail=True), every=3600, max_age=30, patience=PATIENT)
    with pytest.raises(RuntimeError, match="the bucket refused"):
        snapshot.current()
    snapshot.stop()


def test_readings_stop_when_nobody_asks_and_start_again_on_the_next_page() -> None:
    reads = Reads()
    snapshot = Snapshot(reads, every=0.05, max_age=60, idle=0.3, patience=PATIENT)
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


def test_past_its_patience_a_page_gets_how_far_the_reading_has_got_then_the_reading() -> None:
    reads = Reads(seconds=1.0)
    snapshot = Snapshot(reads, every=3600, max_age=60, patience=0.2)
    asked = time.monotonic()
    partial = snapshot.current()
    assert time.monotonic() - asked < 0.9  # did not wait for the reading
    assert isinstance(partial, Partial)
    assert (partial.total, partial.read, partial.statuses) == (2, 1, ())  # found 2, read 1, shown none
    deadline = time.monotonic() + 10
    while isinstance(found := snapshot.current(), Partial):
        assert time.monotonic() < deadline, "the reading never ended"
    assert number(found) == 1
    snapshot.stop()


def test_a_reading_that_ends_within_the_patience_is_served_whole() -> None:
    snapshot = Snapshot(Reads(seconds=0.1), every=3600, max_age=60, patience=5.0)
    assert number(snapshot.current()) == 1
    snapshot.stop()


def test_past_its_patience_a_failed_reading_is_still_the_pages_error() -> None:
    snapshot = Snapshot(Reads(seconds=0.3, fail=True), every=3600, max_age=30, patience=0.05)
    deadline = time.monotonic() + 10
    with pytest.raises(RuntimeError, match="the bucket refused"):  # once the first attempt failed
        while isinstance(snapshot.current(), Partial):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    snapshot.stop()
