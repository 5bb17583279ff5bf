"""The warm drivers' spool in the bucket, on the in-memory store: order, one claim per request,
withdraw against claim, "queue, then look for a driver" against "say LEAVING, then look at the
queue", drivers started twice. Races are played both as explicit interleavings and in threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from turnstile.names import driverspool as names
from turnstile.state import spoolsubmit
from turnstile.state.spoollaunch import announce
from turnstile.state.spoolrecords import DriverState, Outcome, RequestState, SpoolRequest
from turnstile.state.spoolserve import run_one, serve
from turnstile.state.spoolsubmit import JobState, job_status, submit, withdraw
from turnstile.store.memory import MemoryStore


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def queue(store: MemoryStore, clock: ManualClock, job: str) -> spoolsubmit.Queued:
    return submit(store, clock, job, "ds/tbl", {"manifest": f"gs://b/{job}.json"}, bounds=BOUNDS)


def leave_when_idle(idle_since: object, now: object) -> str | None:
    return "idle"


def test_requests_sort_in_submission_order_and_each_runs_once(store: MemoryStore, clock: ManualClock) -> None:
    jobs = ["job-c", "job-a", "job-b"]
    queued = [queue(store, clock, job) for job in jobs]
    assert all(q.driver_needed for q in queued)  # no driver yet
    assert [i.name for i in store.list_objects(names.REQUESTS)] == [q.request for q in queued]
    request = SpoolRequest.decode(store.read(queued[0].request).data, "x")  # type: ignore[union-attr]
    assert (request.job_id, request.table, request.body) == (
        "job-c",
        "ds/tbl",
        {"manifest": "gs://b/job-c.json"},
    )
    runs = Runs()
    assert serve(driver(store, clock), runs, leave_when_idle, clock, 1.0) == "idle"
    assert runs.order == jobs
    for job in jobs:
        view = job_status(store, clock, job, BOUNDS)
        assert view.state is JobState.FINISHED and view.end is not None
        assert (view.end.outcome, view.end.driver_id) == (Outcome.SUCCEEDED, "d1")
        assert store.read(names.started_name(job)) is not None
    assert store.list_objects(names.REQUESTS) == []
    record = driver(store, clock).store.read(names.driver_name("d1"))
    assert record is not None and b'"GONE"' in record.data and b'"jobs_served": 3' in record.data


def test_a_repeated_submit_attaches_to_the_queued_request(store: MemoryStore, clock: ManualClock) -> None:
    first = queue(store, clock, "job-1")
    again = queue(store, clock, "job-1")
    assert again.request == first.request
    assert len(store.list_objects(names.REQUESTS)) == 1


def test_two_drivers_reading_the_same_request_claim_it_once(store: MemoryStore, clock: ManualClock) -> None:
    """Explicit interleaving: both read QUEUED; A's compare-and-swap lands first; B's fails."""
    queued = queue(store, clock, "job-1")
    a, b = driver(store, clock, "a"), driver(store, clock, "b")
    assert a.register() and b.register()
    real_read = store.read
    seen = []

    def read_then_let_a_claim(name: str):  # type: ignore[no-untyped-def]
        found = real_read(name)
        if name == queued.request and not seen:
            seen.append(name)
            assert a.claim(name) is not None  # A claims between B's read and B's write
        return found

    store.read = read_then_let_a_claim  # type: ignore[method-assign]
    assert b.claim(queued.request) is None
    store.read = real_read  # type: ignore[method-assign]
    found = real_read(queued.request)
    assert found is not None and SpoolRequest.decode(found.data, "x").driver_id == "a"


def test_drivers_racing_in_threads_run_every_job_exactly_once(store: MemoryStore, clock: ManualClock) -> None:
    jobs = [f"job-{i:02d}" for i in range(30)]
    for job in jobs:
        queue(store, clock, job)
    runs = Runs()
    start = threading.Barrier(4)

    def one(driver_id: str) -> None:
        start.wait()
        serve(driver(store, clock, driver_id), runs, leave_when_idle, clock, 0.1)

    threads = [threading.Thread(target=one, args=(f"d{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(runs.count) == jobs and set(runs.count.values()) == {1}
    assert all(job_status(store, clock, j, BOUNDS).end.outcome is Outcome.SUCCEEDED for j in jobs)  # type: ignore[union-attr]


def test_a_withdraw_that_lands_first_means_the_job_never_runs(store: MemoryStore, clock: ManualClock) -> None:
    queued = queue(store, clock, "job-1")
    d = driver(store, clock)
    assert d.register()
    real_read = store.read

    def withdraw_after_the_driver_read(name: str):  # type: ignore[no-untyped-def]
        found = real_read(name)
        if name == queued.request:
            store.read = real_read  # type: ignore[method-assign]
            assert withdraw(store, clock, "job-1").withdrawn
        return found

    store.read = withdraw_after_the_driver_read  # type: ignore[method-assign]
    assert d.claim(queued.request) is None  # its compare-and-swap from QUEUED fails
    view = job_status(store, clock, "job-1", BOUNDS)
    assert view.end is not None and view.end.outcome is Outcome.WITHDRAWN
    assert d.take() is None and store.list_objects(names.REQUESTS) == []


def test_a_claim_that_lands_first_makes_the_withdraw_say_which_driver_took_it(
    store: MemoryStore, clock: ManualClock
) -> None:
    queued = queue(store, clock, "job-1")
    d = driver(store, clock)
    assert d.register()
    real_read = store.read

    def claim_after_the_withdraw_read(name: str):  # type: ignore[no-untyped-def]
        found = real_read(name)
        if name == queued.request:
            store.read = real_read  # type: ignore[method-assign]
            assert d.claim(name) is not None
        return found

    store.read = claim_after_the_withdraw_read  # type: ignore[method-assign]
    done = withdraw(store, clock, "job-1")
    assert (done.withdrawn, done.driver_id) == (False, "d1")
    found = real_read(queued.request)
    assert found is not None and SpoolRequest.decode(found.data, "x").state is RequestState.CLAIMED


def test_withdraws_racing_claims_in_threads_never_both_win(store: MemoryStore, clock: ManualClock) -> None:
    jobs = [f"job-{i:02d}" for i in range(40)]
    for job in jobs:
        queue(store, clock, job)
    runs = Runs()
    withdrawn: dict[str, bool] = {}
    start = threading.Barrier(2)

    def cancel_all() -> None:
        start.wait()
        for job in reversed(jobs):
            withdrawn[job] = withdraw(store, clock, job).withdrawn

    def drive() -> None:
        start.wait()
        serve(driver(store, clock), runs, leave_when_idle, clock, 0.1)

    threads = [threading.Thread(target=cancel_all), threading.Thread(target=drive)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job in jobs:
        end = job_status(store, clock, job, BOUNDS).end
        assert end is not None
        if withdrawn[job]:
            assert runs.count[job] == 0 and end.outcome is Outcome.WITHDRAWN
        else:
            assert runs.count[job] == 1 and end.outcome is Outcome.SUCCEEDED


def test_a_request_queued_before_the_driver_says_leaving_is_served_on_its_way_out(
    store: MemoryStore, clock: ManualClock
) -> None:
    """The submitter reads the driver RUNNING (no driver to start); the driver then says LEAVING:
    its listing after that finds the request and serves it."""
    d = driver(store, clock)
    assert d.register()
    queued = queue(store, clock, "job-1")
    assert not queued.driver_needed
    runs = Runs()
    for name in d.leave("idle"):
        claimed = d.claim(name)
        assert claimed is not None
        run_one(d, claimed, runs)
    d.gone()
    assert runs.count["job-1"] == 1


def test_a_request_queued_after_the_driver_says_leaving_asks_for_a_driver(
    store: MemoryStore, clock: ManualClock
) -> None:
    d = driver(store, clock)
    assert d.register()
    assert d.leave("idle") == []
    queued = queue(store, clock, "job-1")
    assert queued.driver_needed  # the submitter starts the next driver
    d.gone()
    runs = Runs()
    serve(driver(store, clock, "d2"), runs, leave_when_idle, clock, 1.0)
    assert runs.count["job-1"] == 1


def race_a_leaving_driver(store: MemoryStore, clock: ManualClock, prefix: str) -> tuple[Runs, list[str]]:
    """Three submitters queue while a driver goes idle and leaves; those told that no driver takes
    requests are listed (they start one)."""
    d = driver(store, clock, f"{prefix}first")
    assert d.register()
    runs = Runs()
    starts: list[str] = []
    start = threading.Barrier(4)

    def submitter(i: int) -> None:
        start.wait()
        if queue(store, clock, f"{prefix}job-{i}").driver_needed:
            starts.append(f"{prefix}job-{i}")

    def leaving() -> None:
        start.wait()
        serve(d, runs, leave_when_idle, clock, 0.1)

    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(3)]
    threads.append(threading.Thread(target=leaving))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return runs, starts


def test_submitters_racing_a_leaving_driver_lose_no_request(store: MemoryStore, clock: ManualClock) -> None:
    """Every submitter told that no driver takes requests starts one: no request is left queued,
    none runs twice."""
    for attempt in range(20):
        prefix = f"r{attempt:02d}-"
        runs, starts = race_a_leaving_driver(store, clock, prefix)
        if starts:
            serve(driver(store, clock, f"{prefix}next"), runs, leave_when_idle, clock, 0.1)
        assert store.list_objects(names.REQUESTS) == [], (attempt, starts)
        assert set(runs.count.values()) == {1} and len(runs.count) == 3


def test_an_announced_driver_counts_until_it_is_late(store: MemoryStore, clock: ManualClock) -> None:
    assert announce(store, clock, "d1", "batch-1")
    assert not announce(store, clock, "d1", "batch-1")  # the id is taken: launch nothing
    assert not queue(store, clock, "job-1").driver_needed
    clock.sleep(BOUNDS.start_within.total_seconds() + 1)
    assert queue(store, clock, "job-2").driver_needed  # it never came
    record = store.read(names.driver_name("d1"))
    assert record is not None and b'"DEAD"' in record.data


def test_a_driver_started_twice_serves_once(store: MemoryStore, clock: ManualClock) -> None:
    assert announce(store, clock, "d1", "batch-1")
    first, second = driver(store, clock, "d1"), driver(store, clock, "d1")
    assert first.register()
    assert not second.register()  # the other start of the same id leaves at once
    queue(store, clock, "job-1")
    runs = Runs()
    assert serve(second, runs, leave_when_idle, clock, 0.1).startswith("another start")
    serve(first, runs, leave_when_idle, clock, 0.1)
    assert runs.count == {"job-1": 1}


def test_a_leaving_or_departed_driver_takes_no_new_request(store: MemoryStore, clock: ManualClock) -> None:
    d = driver(store, clock)
    assert d.register()
    assert not queue(store, clock, "job-0").driver_needed
    d.leave("max lifetime")
    assert queue(store, clock, "job-1").driver_needed
    d.gone()
    record = store.read(names.driver_name("d1"))
    assert record is not None and f'"{DriverState.GONE.value}"'.encode() in record.data
    clock.sleep(timedelta(days=2).total_seconds())
    spoolsubmit.driver_needed(store, clock, BOUNDS)
    assert store.read(names.driver_name("d1")) is None  # pruned once long gone


class OneInterruption:
    """The store, except that the first write or listing after `armed` runs `interrupt` first."""

    def __init__(self, inner: MemoryStore, interrupt: Callable[[], object]) -> None:
        self.inner, self.interrupt, self.armed = inner, interrupt, False

    def __getattr__(self, attribute: str) -> object:
        value = getattr(self.inner, attribute)
        if attribute in {"replace", "create", "list_objects"} and self.armed:
            self.armed = False
            interrupt = self.interrupt

            def interrupted(*args: object, **kwargs: object) -> object:
                result = value(*args, **kwargs)
                interrupt()  # lands between the driver's first step of leaving and its second
                return result

            return interrupted
        return value


def test_a_submit_between_the_two_steps_of_leaving_is_served_or_starts_a_driver(
    store: MemoryStore, clock: ManualClock
) -> None:
    """Whatever order a driver's LEAVING write and its listing of the queue come in, a submit that
    lands between them must end up in the listing or be told to start a driver."""
    queued: list[spoolsubmit.Queued] = []
    hooked = OneInterruption(store, lambda: queued.append(queue(store, clock, "job-1")))
    d = driver(hooked, clock)  # type: ignore[arg-type]
    assert d.register()
    hooked.armed = True
    listed = d.leave("idle")
    (submitted,) = queued
    assert submitted.driver_needed or submitted.request in listed


def test_a_submit_of_a_job_that_ended_attaches_and_starts_no_driver(
    store: MemoryStore, clock: ManualClock
) -> None:
    queue(store, clock, "job-1")
    serve(driver(store, clock), Runs(), leave_when_idle, clock, 0.1)
    again = queue(store, clock, "job-1")
    assert not again.driver_needed
    assert store.list_objects(names.REQUESTS) == []


def test_request_names_sort_by_submission_and_carry_their_job() -> None:
    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)
    first, second = names.request_name(late, "a-job"), names.request_name(early, "z-job")
    assert sorted([first, second]) == [second, first]
    assert names.job_of(first) == "a-job" and names.job_of(f"{names.REQUESTS}junk.json") is None
    with pytest.raises(ValueError, match="job id 'a/b' cannot name a spool object"):
        names.request_name(early, "a/b")
