"""A warm driver runs jobs of different tables side by side (`spoolslots`, DRIVER_SLOTS): never more
than its slots at once, each named in its record while it runs, each reported by whoever finds the
driver dead; a job's thread that ends the driver (a dead Spark context) ends the serving loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.spoolkit import BOUNDS, ManualClock, driver
from turnstile.entrypoints.driver_serve import serve_driver
from turnstile.jobs.driver_policy import dataproc_costs
from turnstile.names import driverspool as names
from turnstile.ops import status_drivers
from turnstile.state import spoolsubmit
from turnstile.state.spoolrecords import DriverRecord, DriverState, Outcome, SpoolRequest
from turnstile.state.spoolserve import serve
from turnstile.state.spoolslots import ThreadSlots
from turnstile.state.spoolsubmit import JobState, job_status, submit
from turnstile.store.memory import MemoryStore

COSTS = dataproc_costs(max_idle_seconds=300, max_lifetime_seconds=3600)
STALE = BOUNDS.stale_after.total_seconds() + 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def queue(store: MemoryStore, clock: ManualClock, job: str) -> None:
    submit(store, clock, job, f"ds/{job}", {"manifest": f"gs://b/{job}.json"}, bounds=BOUNDS)


def leave_when_idle(idle_since: object, now: object) -> str | None:
    return None if idle_since is None else "idle"


def ends(store: MemoryStore, clock: ManualClock, jobs: list[str]) -> list[Outcome | None]:
    views = [job_status(store, clock, job, BOUNDS).end for job in jobs]
    return [None if end is None else end.outcome for end in views]


def test_jobs_of_two_tables_run_side_by_side_in_one_driver(store: MemoryStore, clock: ManualClock) -> None:
    queue(store, clock, "job-a")
    queue(store, clock, "job-b")
    together = threading.Barrier(2, timeout=10)  # broken (the job fails) unless both run at once
    serving: list[tuple[str, ...]] = []
    shown: list[tuple[str | None, int, int]] = []

    def run(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        together.wait()
        found = store.read(names.driver_name("d-1"))
        assert found is not None
        serving.append(DriverRecord.decode(found.data, found.name).serving)
        (view,) = status_drivers.read(store, clock.now(), BOUNDS).drivers  # what `turnstile status` shows
        shown.append((view.serving, view.busy_slots, view.slots))
        together.wait()
        return Outcome.SUCCEEDED, None

    reason = serve_driver(store, clock, "d-1", run, COSTS, poll_seconds=0.05, slots=2, bounds=BOUNDS)
    assert reason == "rent-or-buy"
    assert ends(store, clock, ["job-a", "job-b"]) == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    both = tuple(sorted(names.job_of(name) or "" for name in serving[0]))
    assert both == ("job-a", "job-b")  # its record named both while they ran
    jobs, busy, slots = shown[0]
    assert sorted((jobs or "").split(", ")) == ["job-a", "job-b"] and (busy, slots) == (2, 2)
    found = store.read(names.driver_name("d-1"))
    assert found is not None
    record = DriverRecord.decode(found.data, found.name)
    assert (record.state, record.serving, record.jobs_served) == (DriverState.GONE, (), 2)


def test_one_slot_runs_one_job_at_a_time(store: MemoryStore, clock: ManualClock) -> None:
    queue(store, clock, "job-a")
    queue(store, clock, "job-b")
    together = threading.Barrier(2, timeout=0.5)

    def run(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        together.wait()  # the other job never comes while this one runs
        return Outcome.SUCCEEDED, None

    serve_driver(store, clock, "d-1", run, COSTS, poll_seconds=0.05, slots=1, bounds=BOUNDS)
    assert ends(store, clock, ["job-a", "job-b"]) == [Outcome.FAILED, Outcome.FAILED]


def test_a_driver_never_runs_more_jobs_at_once_than_its_slots(store: MemoryStore, clock: ManualClock) -> None:
    jobs = [f"job-{index}" for index in range(7)]
    for job in jobs:
        queue(store, clock, job)
    running: list[str] = []
    most = [0]
    mutex = threading.Lock()

    def run(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        with mutex:
            running.append(request.job_id)
            most[0] = max(most[0], len(running))
        time.sleep(0.05)
        with mutex:
            running.remove(request.job_id)
        return Outcome.SUCCEEDED, None

    serve(driver(store, clock), run, leave_when_idle, clock, 0.01, slots=ThreadSlots(3))
    assert most[0] == 3
    assert ends(store, clock, jobs) == [Outcome.SUCCEEDED] * 7
    assert store.list_objects(names.REQUESTS) == []


def test_every_job_a_dead_driver_ran_is_reported_failed_transient(
    store: MemoryStore, clock: ManualClock
) -> None:
    queue(store, clock, "job-a")
    queue(store, clock, "job-b")
    zombie = driver(store, clock, "d1")
    assert zombie.register()
    for _ in range(2):
        claimed = zombie.take()
        assert claimed is not None and zombie.start(claimed)
    assert zombie.record is not None and len(zombie.record.serving) == 2
    clock.sleep(STALE)  # no heartbeat since
    assert spoolsubmit.driver_needed(store, clock, BOUNDS)  # declares it dead, reports its jobs
    assert ends(store, clock, ["job-a", "job-b"]) == [Outcome.FAILED_TRANSIENT] * 2
    found = store.read(names.driver_name("d1"))
    assert found is not None and DriverRecord.decode(found.data, found.name).serving == ()


def test_a_job_that_ends_the_driver_ends_its_loop(store: MemoryStore, clock: ManualClock) -> None:
    queue(store, clock, "job-a")

    def run(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        raise SystemExit(1)  # as `spool_driver.run_request` does when the Spark context died

    with pytest.raises(SystemExit):
        serve(driver(store, clock), run, leave_when_idle, clock, 0.01, slots=ThreadSlots(2))
    assert job_status(store, clock, "job-a", BOUNDS).state is JobState.RUNNING  # reported once found dead


def test_a_driver_record_that_named_one_request_still_reads(clock: ManualClock) -> None:
    now = clock.now()
    fields = {"driver_id": "d", "batch": "b", "state": "RUNNING", "started_at": now, "heartbeat_at": now}
    one = DriverRecord.model_validate({**fields, "serving": f"{names.REQUESTS}1-job-a.json"})
    none = DriverRecord.model_validate({**fields, "serving": None})
    assert one.serving == (f"{names.REQUESTS}1-job-a.json",) and none.serving == ()
