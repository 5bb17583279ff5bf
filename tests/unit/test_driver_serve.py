"""The warm driver's loop (`entrypoints.driver_serve`) on the in-memory store: it serves the queue in
order, rejects a garbage request and goes on, leaves when the stay-up policy says so, and hands
the policy's history to its successor."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs
from turnstile.entrypoints.driver_serve import (
    PolicyHistory,
    StayUp,
    load_history,
    serve_driver,
)
from turnstile.jobs.driver_policy import History, dataproc_costs
from turnstile.names import driverspool as names
from turnstile.state.spoolrecords import (
    DriverRecord,
    DriverState,
    Outcome,
    RejectedRequest,
    SpoolBounds,
    SpoolRequest,
)
from turnstile.state.spoolsubmit import JobState, job_status, request_stop, submit
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
    assert history.left_after < 1.01  # no gap worth waiting for (microseconds): it left within a poll


def test_a_failing_job_is_recorded_failed_and_the_driver_goes_on(
    store: MemoryStore, clock: ManualClock
) -> None:
    for job in ("job-a", "job-b"):
        submit(store, clock, job, "ds/a", {"manifest": f"gs://b/{job}.json"}, bounds=BOUNDS)
    ran: list[str] = []

    def run(request: object, stop_requested: object) -> tuple[Outcome, str | None]:
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


class SubmitsWhileIdle(ManualClock):
    """The subscriber submits `job` once the driver has slept `after` seconds idle: the time from a
    commit to its successor's request (the done signal, then the subscriber's turn)."""

    def __init__(self, job: str, after: float) -> None:
        super().__init__()
        self.job, self.after, self.idle = job, after, 0.0
        self.store: MemoryStore | None = None

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.idle += seconds
        if self.store is not None and self.idle >= self.after:
            store, self.store = self.store, None
            submit(store, self, self.job, "ds/a", {"manifest": f"gs://b/{self.job}.json"}, bounds=BOUNDS)


def test_a_driver_with_no_history_waits_for_a_request_its_last_job_said_is_coming() -> None:
    """A job queued with more of its table's backlog behind it: its successor comes as soon as it
    commits, so the driver waits for it (up to the break-even) instead of leaving at once, and
    leaves once the table's last job is done. Without the hint it leaves at once (the test above)."""
    clock = SubmitsWhileIdle("job-2", after=20)
    store = MemoryStore("spool", clock=clock)
    clock.store = store
    submit(store, clock, "job-1", "ds/a", {"manifest": "gs://b/job-1.json"}, bounds=BOUNDS, more_queued=True)
    runs = Runs()
    reason = serve_driver(store, clock, "turnstile-drv-0a-1", runs, COSTS, poll_seconds=1.0, bounds=BOUNDS)
    assert reason == "rent-or-buy" and runs.order == ["job-1", "job-2"]
    record = store.read(names.driver_name("turnstile-drv-0a-1"))
    assert record is not None and DriverRecord.decode(record.data, "x").jobs_served == 2


def test_a_cancel_of_a_running_job_stops_it_at_a_batch_boundary_and_ends_it_cancelled(
    store: MemoryStore, clock: ManualClock
) -> None:
    """The runner's cancel of a job a driver runs writes its stop request; the serving loop sees it
    within a heartbeat interval and the job, which looks before each batch, stops: CANCELLED."""
    quick = SpoolBounds(stale_after=timedelta(seconds=0.4), start_within=timedelta(minutes=5))
    submit(store, clock, "job-a", "ds/a", {"manifest": "gs://b/a.json"}, bounds=quick)
    applied: list[int] = []

    def batches(request: SpoolRequest, stop_requested: Callable[[], bool]) -> tuple[Outcome, str | None]:
        for batch in range(100):
            if stop_requested():
                return Outcome.FAILED, f"cancelled: stopped at a batch boundary, before batch {batch}"
            if batch == 2:
                request_stop(store, clock, request.job_id)  # as WarmRunner.cancel does
            applied.append(batch)
            clock.sleep(0.05)  # a batch: the loop looks for stops every 0.1 s
            time.sleep(0.05)
        return Outcome.SUCCEEDED, None

    serve_driver(store, clock, "d-1", batches, COSTS, poll_seconds=1.0, bounds=quick)
    assert 3 <= len(applied) < 20
    view = job_status(store, clock, "job-a", quick)
    assert view.end is not None and view.end.outcome is Outcome.CANCELLED
    assert view.end.error == f"cancelled: stopped at a batch boundary, before batch {len(applied)}"


def test_an_awaited_request_keeps_an_idle_driver_up_for_the_break_even(clock: ManualClock) -> None:
    policy = StayUp.from_record(COSTS, clock.now().timestamp(), PolicyHistory())
    request = SpoolRequest(job_id="j", table="ds/a", submitted_at=clock.now(), more_queued=True)
    policy.arrived(request)
    idle_since = clock.now()
    breakeven = COSTS.break_even_seconds
    assert policy.should_leave(idle_since, idle_since + timedelta(seconds=breakeven - 1)) is None
    assert policy.should_leave(idle_since, idle_since + timedelta(seconds=breakeven)) == "rent-or-buy"
    policy.arrived(request.model_copy(update={"job_id": "k", "more_queued": False}))
    assert policy.should_leave(idle_since, idle_since + timedelta(seconds=1)) == "rent-or-buy"


def test_past_its_lifetime_a_driver_leaves_before_taking_more(clock: ManualClock) -> None:
    policy = StayUp.from_record(COSTS, clock.now().timestamp(), PolicyHistory(gaps=(5.0,) * 8))
    later = clock.now() + timedelta(seconds=COSTS.max_lifetime_seconds + 1)
    assert policy.should_leave(later, later) == "max lifetime"


def test_an_unreadable_history_starts_afresh(store: MemoryStore) -> None:
    store.write(names.HISTORY, b"[]")
    assert load_history(store).model_dump(exclude={"nonce"}) == PolicyHistory().model_dump(exclude={"nonce"})
