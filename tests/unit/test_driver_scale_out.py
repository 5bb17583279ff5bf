"""Scale-out in the warm Dataproc runner (DRIVER_MAX_COUNT): a submit that finds drivers taking
requests starts another when requests waited longer than a start-up, never past the bound; the
extra driver ranks behind the oldest and leaves first when idle."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from tests.unit.test_dataproc_warm import Batches, manifest
from turnstile.entrypoints.driver_serve import PolicyHistory, StayUp, serve_driver
from turnstile.jobs.driver_policy import PolicyCosts, dataproc_costs
from turnstile.jobs.port import JobState
from turnstile.jobs.warm_runner import WarmRunner
from turnstile.names import driverspool as names
from turnstile.store.memory import MemoryStore

STARTUP = dataproc_costs(300, 3600).startup_seconds


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def runner(store: MemoryStore, clock: ManualClock, batches: Batches, max_drivers: int) -> WarmRunner:
    return WarmRunner(
        batches,
        store,
        spool_bucket="inbound",
        prefix="turnstile",
        driver_main_uri="gs://artifacts/job/driver.py",
        clock=clock,
        bounds=BOUNDS,
        max_drivers=max_drivers,
    )


def busy_driver(store: MemoryStore, clock: ManualClock, batches: Batches, warm: WarmRunner) -> None:
    """The first job's driver is up and runs it (its one slot busy), then job-b queues behind it."""
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    batches.states[batch_id] = JobState.RUNNING
    first = driver(store, clock, batch_id)
    assert first.register() and first.rank == 0
    claimed = first.take()
    assert claimed is not None and first.start(claimed)
    warm.submit("job-b", manifest("job-b"))


@pytest.mark.parametrize("max_drivers", [1, 3])
def test_a_request_that_waited_longer_than_a_start_up_starts_another_driver_up_to_the_bound(
    store: MemoryStore, clock: ManualClock, max_drivers: int
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, max_drivers)
    busy_driver(store, clock, batches, warm)
    clock.sleep(STARTUP / 2)
    warm.submit("job-c", manifest("job-c"))  # job-b has waited less than a start-up
    assert len(batches.created) == 1
    clock.sleep(STARTUP)
    warm.submit("job-d", manifest("job-d"))  # now it has waited longer
    assert len(batches.created) == min(2, max_drivers)
    warm.submit("job-e", manifest("job-e"))  # the extra one is starting: one start at a time
    assert len(batches.created) == min(2, max_drivers)


def test_no_driver_starts_beside_one_whose_queue_is_empty(store: MemoryStore, clock: ManualClock) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, 3)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    first = driver(store, clock, batch_id)
    assert first.register()
    claimed = first.take()
    assert claimed is not None and first.start(claimed)
    clock.sleep(STARTUP * 2)  # job-a runs long, nothing else waits
    warm.submit("job-b", manifest("job-b"))  # fresh: it has waited no time
    assert len(batches.created) == 1


def test_the_extra_driver_ranks_behind_the_oldest_and_leaves_first_when_idle(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, 2)
    busy_driver(store, clock, batches, warm)
    clock.sleep(STARTUP * 1.5)
    warm.submit("job-c", manifest("job-c"))
    extra_id = batches.created[1][0]
    # A platform whose start-up (20 s) is shorter than the break-even (60 s), and gaps of 50 s that
    # the oldest driver waits through: an extra one waits only a start-up.
    costs = PolicyCosts(dcu=12, idle_dcu=12, startup_seconds=20, min_billed_seconds=60)
    store.write(names.HISTORY, PolicyHistory(gaps=(50.0,) * 8).encode())
    runs = Runs()
    reason = serve_driver(store, clock, extra_id, runs, costs, poll_seconds=1.0, bounds=BOUNDS)
    assert reason == "extra driver" and runs.order == ["job-b", "job-c"]
    oldest = StayUp.from_record(costs, clock.now().timestamp(), PolicyHistory(gaps=(50.0,) * 8))
    idle_since = clock.now()
    assert oldest.should_leave(idle_since, idle_since + timedelta(seconds=30)) is None


def test_no_driver_starts_beside_one_with_a_free_slot(store: MemoryStore, clock: ManualClock) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, 3)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    first = driver(store, clock, batch_id)
    assert first.register(slots=2)
    claimed = first.take()
    assert claimed is not None and first.start(claimed)
    warm.submit("job-b", manifest("job-b"))
    clock.sleep(STARTUP * 2)  # job-b waits (the driver has not polled yet), but a slot is free
    warm.submit("job-c", manifest("job-c"))
    assert len(batches.created) == 1
