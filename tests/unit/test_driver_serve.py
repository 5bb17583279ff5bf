"""The warm driver's loop (`entrypoints.driver_serve`) on the in-memory store: it serves the queue in
order, rejects a garbage request and goes on, leaves when the stay-up policy says so, and hands
the policy's history to its successor."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs
from turnstile.entrypoints.driver_serve import (
    PolicyHistory,
    StayUp,
    dataproc_costs,
    load_history,
    serve_driver,
)
from turnstile.jobs.driver_policy import History
from turnstile.names import driverspool as names
from turnstile.state.spoolrecords import DriverRecord, DriverState, Outcome, RejectedRequest
from turnstile.state.spoolsubmit import JobState, job_status, submit
from turnstile.store.memory import MemoryStore

COSTS = dataproc_costs(max_idle_seconds=300, max_lifetime_seconds=3600)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def test_the_driver_serves_the_queue_rejects_garbage_and_leaves_by_the_policy(
    store: MemoryStore, clock: ManualClock
) -> None:
    submit(store, clock, "job-a", "ds/a", {"manifest": "gs://b/a.json"}, bounds=BOUNDS)
    store.write(f"{names.REQUESTS}00000000000000000001-job-garbage.json", b"{not a request")
    submit(store, clock, "job-b", "ds/b", {"manifest": "gs://b/b.json"}, bounds=BOUNDS)
    runs = Runs()
    reason = serve_driver(store, clock, "turnstile-drv-0a-1", runs, COSTS, poll_seconds=1.0, bounds=BOUNDS)
    assert reason == "rent-or-buy"  # no history yet: a restart is cheaper than waiting
    assert runs.order == ["job-a", "job-b"]  # the garbage request did not stop it
    for job in ("job-a", "job-b"):
        view = job_status(store, clock, job, BOUNDS)
        assert view.state is JobState.FINISHED and view.end is not None
        assert view.end.outcome is Outcome.SUCCEEDED
    garbage = job_status(store, clock, "job-garbage", BOUNDS)
    assert garbage.end is not None and garbage.end.outcome is Outcome.FAILED
    (rejected,) = store.list_objects(names.REJECTED)
    assert (
        "does not hold a turnstile spool request"
        in RejectedRequest.decode(
            store.read(rejected.name).data,  # type: ignore[union-attr]
            "x",
        ).error
    )
    record = DriverRecord.decode(store.read(names.driver_name("turnstile-drv-0a-1")).data, "x")  # type: ignore[union-attr]
    assert (record.state, record.jobs_served) == (DriverState.GONE, 2)
    history = load_history(store)
    assert history.finished_at is not None and history.left_after is not None
    assert history.left_after < 1  # it found no history: it left at once, after what it had listed


def test_a_failing_job_is_recorded_failed_and_the_driver_goes_on(
    store: MemoryStore, clock: ManualClock
) -> None:
    for job in ("job-a", "job-b"):
        submit(store, clock, job, "ds/a", {"manifest": f"gs://b/{job}.json"}, bounds=BOUNDS)
    ran: list[str] = []

    def run(request: object) -> tuple[Outcome, str | None]:
        job = request.job_id
        ran.append(job)
        if job == "job-a":
            raise RuntimeError("the executor was lost")
        return Outcome.SUCCEEDED, None

    serve_driver(store, clock, "d-1", run, COSTS, poll_seconds=1.0, bounds=BOUNDS)
    assert ran == ["job-a", "job-b"]
    failed = job_status(store, clock, "job-a", BOUNDS).end
    assert failed is not None and failed.outcome is Outcome.FAILED
    assert "the executor was lost" in (failed.error or "")


def test_a_burst_teaches_the_next_driver_to_stay_up_through_short_gaps(clock: ManualClock) -> None:
    burst = PolicyHistory(gaps=(5.0, 8.0, 12.0, 6.0), finished_at=None)
    policy = StayUp.from_record(COSTS, clock.now().timestamp(), burst)
    idle_since = clock.now()
    assert policy.should_leave(idle_since, idle_since + timedelta(seconds=4)) is None  # stays
    assert policy.should_leave(idle_since, idle_since + timedelta(seconds=400)) is not None
    fresh = StayUp.from_record(COSTS, clock.now().timestamp(), PolicyHistory())
    assert fresh.history == History()
    assert fresh.should_leave(idle_since, idle_since + timedelta(seconds=1)) == "rent-or-buy"


def test_past_its_lifetime_a_driver_leaves_before_taking_more(clock: ManualClock) -> None:
    policy = StayUp.from_record(COSTS, clock.now().timestamp(), PolicyHistory(gaps=(5.0,) * 8))
    later = clock.now() + timedelta(seconds=COSTS.max_lifetime_seconds + 1)
    assert policy.should_leave(later, later) == "max lifetime"


def test_an_unreadable_history_starts_afresh(store: MemoryStore) -> None:
    store.write(names.HISTORY, b"[]")
    assert load_history(store).model_dump(exclude={"nonce"}) == PolicyHistory().model_dump(exclude={"nonce"})
