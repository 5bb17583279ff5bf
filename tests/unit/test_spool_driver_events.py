"""A warm driver says when it starts and why it stops, as log events the alerts and `status` users
read: `driver_started`, `driver_left` (INFO, its policy's reason), `driver_fenced` and
`driver_not_started` (WARNING)."""

from __future__ import annotations

import logging

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from turnstile.state.spoolrecords import DriverState
from turnstile.state.spoolserve import serve
from turnstile.state.spoolsubmit import submit
from turnstile.store.memory import MemoryStore


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, int, dict[str, object]]]:
    return [
        (r.event, r.levelno, {k: getattr(r, k) for k in ("driver", "reason", "jobs_served") if hasattr(r, k)})
        for r in caplog.records
        if getattr(r, "event", "").startswith("driver_")
    ]


def test_a_driver_that_serves_then_leaves_says_both_with_its_reason_and_jobs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    store = MemoryStore("spool", clock=clock)
    for job in ("job-a", "job-b"):
        submit(store, clock, job, "ds/tbl", {}, bounds=BOUNDS)
    with caplog.at_level(logging.INFO, logger="turnstile"):
        serve(driver(store, clock), Runs(), lambda idle, now: "rent-or-buy", clock, 1.0)
    assert events(caplog) == [
        ("driver_started", logging.INFO, {"driver": "d1"}),
        ("driver_left", logging.INFO, {"driver": "d1", "reason": "rent-or-buy", "jobs_served": 2}),
    ]


def test_a_second_start_of_a_running_driver_warns_and_takes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    store = MemoryStore("spool", clock=clock)
    assert driver(store, clock, instance="first").register()
    submit(store, clock, "job-a", "ds/tbl", {}, bounds=BOUNDS)
    runs = Runs()
    with caplog.at_level(logging.INFO, logger="turnstile"):
        serve(driver(store, clock, instance="second"), runs, lambda idle, now: "idle", clock, 1.0)
    [(event, level, fields)] = events(caplog)
    assert (event, level, fields["driver"]) == ("driver_not_started", logging.WARNING, "d1")
    assert not runs.order


def test_a_driver_declared_dead_while_alive_is_fenced_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock()
    store = MemoryStore("spool", clock=clock)
    d1 = driver(store, clock)

    def stall(idle: object, now: object) -> str | None:
        # Another reader finds the heartbeat stale and declares the driver dead meanwhile.
        found = store.read(d1.name)
        assert found is not None and d1.record is not None
        dead = d1.record.model_copy(update={"state": DriverState.DEAD, "reason": "no heartbeat"})
        store.replace(d1.name, dead.encode(), if_generation=found.generation)
        return None

    with caplog.at_level(logging.INFO, logger="turnstile"):
        serve(d1, Runs(), stall, clock, 1.0)
    assert [(e, lvl) for e, lvl, _ in events(caplog)] == [
        ("driver_started", logging.INFO),
        ("driver_fenced", logging.WARNING),
    ]
