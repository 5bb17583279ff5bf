"""The spool in the bucket when things go wrong: a driver that dies (or only stalls) with a job,
a request object that holds garbage, spool objects removed by hand."""

from __future__ import annotations

import time

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from turnstile.core.errors import PreconditionFailed
from turnstile.names import driverspool as names
from turnstile.state import spoolsubmit
from turnstile.state.spooldriver import Fenced
from turnstile.state.spoolrecords import JobFinished, Outcome, RejectedRequest, SpoolRequest
from turnstile.state.spoolserve import run_one, serve
from turnstile.state.spoolsubmit import JobState, job_status, submit
from turnstile.store.memory import MemoryStore

STALE = BOUNDS.stale_after.total_seconds() + 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def queue(store: MemoryStore, clock: ManualClock, job: str) -> spoolsubmit.Queued:
    return submit(store, clock, job, "ds/tbl", {}, bounds=BOUNDS)


def leave_when_idle(idle_since: object, now: object) -> str | None:
    return "idle"


def test_the_job_of_a_dead_driver_is_reported_failed_transient_and_not_run_again(
    store: MemoryStore, clock: ManualClock
) -> None:
    queue(store, clock, "job-1")
    zombie = driver(store, clock, "d1")
    assert zombie.register()
    claimed = zombie.take()
    assert claimed is not None and zombie.start(claimed)
    assert job_status(store, clock, "job-1", BOUNDS).state is JobState.RUNNING
    clock.sleep(STALE)  # no heartbeat since
    assert spoolsubmit.driver_needed(store, clock, BOUNDS)  # declares it dead, reports its job
    view = job_status(store, clock, "job-1", BOUNDS)
    assert view.end is not None and view.end.outcome is Outcome.FAILED_TRANSIENT
    assert "d1" in (view.end.error or "")
    # Another driver finds nothing to run again.
    runs = Runs()
    serve(driver(store, clock, "d2"), runs, leave_when_idle, clock, 0.1)
    assert runs.count == {}
    # The zombie wakes up: its end does not replace the report, and it takes nothing more.
    with pytest.raises(Fenced):
        zombie.finish(claimed, Outcome.SUCCEEDED)
    assert job_status(store, clock, "job-1", BOUNDS).end == view.end
    with pytest.raises(Fenced):
        zombie.heartbeat()


def test_a_status_read_reports_the_job_of_a_driver_that_died_holding_it(
    store: MemoryStore, clock: ManualClock
) -> None:
    queue(store, clock, "job-1")
    d = driver(store, clock, "d1")
    assert d.register()
    assert d.take() is not None  # claimed, then the driver dies before starting it
    assert job_status(store, clock, "job-1", BOUNDS).state is JobState.CLAIMED
    clock.sleep(STALE)
    view = job_status(store, clock, "job-1", BOUNDS)
    assert view.end is not None and view.end.outcome is Outcome.FAILED_TRANSIENT
    assert store.list_objects(names.REQUESTS) == []


def test_a_driver_declared_dead_between_naming_a_request_and_claiming_it_is_caught_later(
    store: MemoryStore, clock: ManualClock
) -> None:
    """The repairer reads the request still QUEUED, then the stalled driver's claim lands: the
    dead driver's record still names it, so the next repair reports it."""
    queued = queue(store, clock, "job-1")
    d = driver(store, clock, "d1")
    assert d.register()
    real_replace = store.replace

    def stall_before_the_claim(name: str, data: bytes, *, if_generation: int) -> int:
        if name == queued.request:
            clock.sleep(STALE)
            spoolsubmit.driver_needed(store, clock, BOUNDS)  # declared dead; its request is QUEUED
        return real_replace(name, data, if_generation=if_generation)

    store.replace = stall_before_the_claim  # type: ignore[method-assign]
    claimed = d.take()
    store.replace = real_replace  # type: ignore[method-assign]
    assert claimed is not None  # the claim landed after all
    assert job_status(store, clock, "job-1", BOUNDS).state is JobState.FINISHED
    end = job_status(store, clock, "job-1", BOUNDS).end
    assert end is not None and end.outcome is Outcome.FAILED_TRANSIENT


def test_a_garbage_request_is_recorded_failed_under_its_name_and_the_driver_goes_on(
    store: MemoryStore, clock: ManualClock
) -> None:
    garbage = f"{names.REQUESTS}00000000000000000001-job-0.json"
    store.write(garbage, b"not json at all")
    store.write(f"{names.REQUESTS}00000000000000000002-not a job.json", b"{}")
    queue(store, clock, "job-1")
    runs = Runs()
    d = driver(store, clock)
    assert d.register()
    while (claimed := d.take()) is not None:
        run_one(d, claimed, runs)
    assert runs.count == {"job-1": 1}
    rejected = store.read(names.rejected_name(garbage))
    assert rejected is not None
    assert garbage in RejectedRequest.decode(rejected.data, "x").error
    end = store.read(names.finished_name("job-0"))
    assert end is not None and JobFinished.decode(end.data, "x").outcome is Outcome.FAILED
    assert store.list_objects(names.REQUESTS) == []
    assert len(store.list_objects(names.REJECTED)) == 2


def test_a_request_removed_by_hand_is_queued_again_by_the_next_submit(
    store: MemoryStore, clock: ManualClock
) -> None:
    queued = queue(store, clock, "job-1")
    assert store.remove(queued.request)
    assert job_status(store, clock, "job-1", BOUNDS).state is JobState.QUEUED  # within the grace
    again = queue(store, clock, "job-1")
    assert again.request == queued.request and store.read(queued.request) is not None
    runs = Runs()
    serve(driver(store, clock), runs, leave_when_idle, clock, 0.1)
    assert runs.count == {"job-1": 1}


def test_a_request_removed_by_hand_and_never_submitted_again_is_reported_lost(
    store: MemoryStore, clock: ManualClock
) -> None:
    queued = queue(store, clock, "job-1")
    store.remove(queued.request)
    clock.sleep(STALE)
    end = job_status(store, clock, "job-1", BOUNDS).end
    assert (
        end is not None and end.outcome is Outcome.FAILED_TRANSIENT and "removed by hand" in (end.error or "")
    )


def test_a_request_re_created_after_its_job_started_is_not_run_twice(
    store: MemoryStore, clock: ManualClock
) -> None:
    queued = queue(store, clock, "job-1")
    first = driver(store, clock, "d1")
    assert first.register()
    claimed = first.take()
    assert claimed is not None and first.start(claimed)
    found = store.read(queued.request)
    assert found is not None
    store.remove(queued.request)  # removed by hand while it runs...
    store.write(queued.request, found.data.replace(b'"CLAIMED"', b'"QUEUED"'))  # ...and restored wrongly
    second = driver(store, clock, "d2")
    assert second.register()
    again = second.take()
    assert again is not None
    assert not second.start(again)  # started before: reported, not run
    end = job_status(store, clock, "job-1", BOUNDS).end
    assert end is not None and end.outcome is Outcome.FAILED_TRANSIENT


def test_a_driver_record_removed_by_hand_is_written_again_by_its_heartbeat(
    store: MemoryStore, clock: ManualClock
) -> None:
    d = driver(store, clock)
    assert d.register()
    store.remove(names.driver_name("d1"))
    assert queue(store, clock, "job-1").driver_needed  # no record: the submitter starts one
    d.heartbeat()
    assert store.read(names.driver_name("d1")) is not None
    assert not queue(store, clock, "job-2").driver_needed


def test_a_job_longer_than_the_stale_bound_keeps_its_driver_alive(
    store: MemoryStore, clock: ManualClock
) -> None:
    queue(store, clock, "job-1")
    d = driver(store, clock, "d1")
    seen: list[JobState] = []

    def beaten(since: object) -> bool:
        """Whether the serving loop wrote the driver's heartbeat after `since` (within 5 s)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if d.record is not None and d.record.heartbeat_at >= since:
                return True
            time.sleep(0.01)
        return False

    def long_job(request: SpoolRequest, stop_requested: object) -> tuple[Outcome, str | None]:
        for _ in range(6):  # the job runs three stale bounds long; the loop beats all along
            clock.sleep(STALE / 2)
            assert beaten(clock.now())
            seen.append(job_status(store, clock, "job-1", BOUNDS).state)
        return Outcome.SUCCEEDED, None

    serve(d, long_job, lambda idle_since, now: None if idle_since is None else "idle", clock, 0.05)
    assert seen == [JobState.RUNNING] * 6
    end = job_status(store, clock, "job-1", BOUNDS).end
    assert end is not None and end.outcome is Outcome.SUCCEEDED, end


def test_a_job_reported_lost_while_its_submit_stalled_never_runs(
    store: MemoryStore, clock: ManualClock
) -> None:
    """The submit's create of the request stalls past the grace: a status read reports the job
    lost; the create lands after all. No driver runs the job, and the queue ends empty."""
    real_create = store.create
    reported = []

    def stalled(name: str, data: bytes) -> int:
        if name.startswith(names.REQUESTS) and not reported:
            store.create = real_create  # type: ignore[method-assign]
            clock.sleep(STALE)
            reported.append(job_status(store, clock, "job-1", BOUNDS))  # while the create is under way
            assert store.read(name) is None  # its LOST marker settled and removed: now the create lands
        return real_create(name, data)

    store.create = stalled  # type: ignore[method-assign]
    queue(store, clock, "job-1")
    (view,) = reported
    assert view.end is not None and view.end.outcome is Outcome.FAILED_TRANSIENT
    runs = Runs()
    serve(driver(store, clock), runs, lambda idle, now: "idle", clock, 0.1)
    assert runs.count == {}
    assert store.list_objects(names.REQUESTS) == []


def test_a_late_create_of_a_request_reported_lost_fails(store: MemoryStore, clock: ManualClock) -> None:
    queued = queue(store, clock, "job-1")
    found = store.read(queued.request)
    assert found is not None
    store.remove(queued.request)
    clock.sleep(STALE)
    real_create = store.create
    late = []

    def create_lands_now(name: str, data: bytes) -> int:
        generation = real_create(name, data)  # the status's LOST marker...
        if name == queued.request and not late:
            try:
                real_create(name, found.data)  # ...makes the submit's late create fail
            except PreconditionFailed:
                late.append(name)
        return generation

    store.create = create_lands_now  # type: ignore[method-assign]
    end = job_status(store, clock, "job-1", BOUNDS).end
    assert late == [queued.request]
    assert end is not None and end.outcome is Outcome.FAILED_TRANSIENT
    assert store.read(queued.request) is None
