"""The warm Dataproc runner's logic on the in-memory store: driver batch ids, the driver sequence
that makes racing submitters start one driver, status read from the spool, a driver whose batch
ended making its job a transient failure, cancel as a withdraw. Dataproc itself is a recording
double here; tests/contract/test_dataproc_warm.py runs the same against the Dataproc emulator."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping
from datetime import timedelta

import pytest
from google.cloud import dataproc_v1

from tests.spoolkit import BOUNDS, ManualClock, Runs, driver
from turnstile.core.errors import SettingsError
from turnstile.jobs.dataproc import DataprocBatchSpec
from turnstile.jobs.port import JobState, JobStatus
from turnstile.jobs.warm_runner import DRIVER_LABEL, WarmRunner, driver_batch_id, table_of
from turnstile.names import driverspool as names
from turnstile.state import spoollaunch, spoolsubmit
from turnstile.state.spoolrecords import DriverRecord, DriverState, Outcome
from turnstile.state.spoolserve import serve
from turnstile.store.memory import MemoryStore
from turnstile.store.port import StoredObject

DATAPROC_ID = re.compile(r"[a-z][a-z0-9-]{2,61}[a-z0-9]")  # CreateBatch's batch_id rule


class Batches:
    """Records CreateBatch calls; batch states are set by the test."""

    service = "Dataproc batch"

    def __init__(self) -> None:
        self.spec = DataprocBatchSpec(main_python_file_uri="gs://artifacts/job/main.py")
        self.created: list[tuple[str, dataproc_v1.Batch]] = []
        self.states: dict[str, JobState] = {}
        self.cancelled: list[str] = []
        self._lock = threading.Lock()

    def create(self, job_id: str, batch: dataproc_v1.Batch) -> None:
        with self._lock:
            self.created.append((job_id, batch))
            self.states.setdefault(job_id, JobState.PENDING)

    def status(self, job_id: str) -> JobStatus | None:
        state = self.states.get(job_id)
        return (
            None if state is None else JobStatus(job_id, state, "boom" if state is JobState.FAILED else None)
        )

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None:
        self.create(batch_id, self.spec.program(main, args, labels))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store(clock: ManualClock) -> MemoryStore:
    return MemoryStore("spool", clock=clock)


def runner(
    store: MemoryStore, clock: ManualClock, batches: Batches, start_timeout: timedelta = timedelta(hours=1)
) -> WarmRunner:
    return WarmRunner(
        batches,
        store,
        spool_bucket="inbound",
        prefix="turnstile",
        driver_main_uri="gs://artifacts/job/driver.py",
        driver_args=("--poll-seconds", "1"),
        clock=clock,
        bounds=BOUNDS,
        start_timeout=start_timeout,
    )


def manifest(job: str) -> str:
    return f"gs://inbound/ds/tbl/_turnstile/jobs/{job}.manifest.json"


def test_driver_batch_ids_keep_dataprocs_rule_and_differ_by_deployment() -> None:
    first = driver_batch_id("turnstile", "inbound", 1)
    assert first.startswith("turnstile-drv-") and first.endswith("-1")
    assert DATAPROC_ID.fullmatch(first)
    assert driver_batch_id("turnstile", "inbound", 1) == first  # deterministic
    assert driver_batch_id("turnstile", "other-bucket", 1) != first
    longest = driver_batch_id("a" * 20, "b" * 222, 10**12)
    assert DATAPROC_ID.fullmatch(longest) and len(longest) <= 63
    with pytest.raises(SettingsError, match="JOB_PREFIX 'Bad_Prefix'"):
        driver_batch_id("Bad_Prefix", "inbound", 1)


def launched(store: MemoryStore) -> int:
    """The number of the last driver launched (the driver sequence)."""
    found = store.read(names.SEQUENCE)
    assert found is not None
    return spoollaunch.DriverSequence.decode(found.data, "x").number


def test_table_of_a_manifest() -> None:
    assert table_of(manifest("j")) == "ds/tbl"
    assert table_of("gs://b/odd.json") == "odd.json"


class Paused(MemoryStore):
    """Holds every reader of the sequence until `parties` have read it: the race of two submitters
    that both read number N before either writes N + 1."""

    def __init__(self, clock: ManualClock, parties: int) -> None:
        super().__init__("spool", clock=clock)
        self.barrier = threading.Barrier(parties, timeout=10)
        self.racing = True

    def read(self, name: str) -> StoredObject | None:
        found = super().read(name)
        if name == names.SEQUENCE and self.racing:
            self.barrier.wait()
        return found


def test_two_submitters_that_race_start_one_driver(clock: ManualClock) -> None:
    store = Paused(clock, parties=2)
    batches = Batches()
    warm = runner(store, clock, batches)
    threads = [threading.Thread(target=warm.submit, args=(job, manifest(job))) for job in ("job-a", "job-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.racing = False
    assert [batch_id for batch_id, _ in batches.created] == [
        driver_batch_id("turnstile", "inbound", launched(store))
    ]
    batch_id, batch = batches.created[0]
    assert batch.pyspark_batch.main_python_file_uri == "gs://artifacts/job/driver.py"
    assert list(batch.pyspark_batch.args) == [
        "--spool-bucket",
        "inbound",
        "--driver-id",
        batch_id,
        "--poll-seconds",
        "1",
    ]
    assert batch.labels[DRIVER_LABEL] == "true"
    record = DriverRecord.decode(store.read(names.driver_name(batch_id)).data, "x")  # type: ignore[union-attr]
    assert (record.state, record.batch) == (DriverState.STARTING, batch_id)


def test_a_job_queued_while_a_driver_runs_starts_no_batch_and_its_status_follows_the_spool(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    batches.states[batch_id] = JobState.RUNNING
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)
    served = driver(store, clock, batch_id)
    assert served.register()  # takes the announced record
    warm.submit("job-b", manifest("job-b"))
    warm.submit("job-b", manifest("job-b"))  # a retried submit attaches
    assert len(batches.created) == 1
    runs = Runs()
    assert serve(served, runs, lambda idle, now: "idle", clock, 1.0) == "idle"
    assert runs.order == ["job-a", "job-b"]
    assert warm.status("job-b") == JobStatus("job-b", JobState.SUCCEEDED)
    assert warm.status("never") is None  # unknown to the spool and to Dataproc


def test_a_driver_whose_batch_failed_makes_its_running_job_a_transient_failure(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    served = driver(store, clock, batch_id)
    assert served.register()
    claimed = served.take()
    assert claimed is not None and served.start(claimed)
    batches.states[batch_id] = JobState.RUNNING
    assert warm.status("job-a") == JobStatus("job-a", JobState.RUNNING)
    batches.states[batch_id] = JobState.CANCELLED  # the batch was cancelled (or died) mid-job
    status = warm.status("job-a")
    assert status is not None and status.state is JobState.FAILED
    assert status.detail is not None and "transient" in status.detail and batch_id in status.detail
    record = DriverRecord.decode(store.read(names.driver_name(batch_id)).data, "x")  # type: ignore[union-attr]
    assert record.state is DriverState.DEAD
    assert store.list_objects(names.REQUESTS) == []
    # The next job starts the next driver.
    warm.submit("job-b", manifest("job-b"))
    assert [b for b, _ in batches.created] == [
        batch_id,
        driver_batch_id("turnstile", "inbound", launched(store)),
    ]
    assert launched(store) == int(batch_id.rsplit("-", 1)[1]) + 1


def test_a_queued_job_whose_driver_never_started_gets_a_new_driver_on_status(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    clock.sleep((BOUNDS.start_within + timedelta(seconds=1)).total_seconds())
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)
    assert len(batches.created) == 2


def test_a_job_no_driver_started_for_fails_as_transient_after_the_start_timeout_and_never_runs(
    store: MemoryStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, start_timeout=timedelta(minutes=10))
    warm.submit("job-a", manifest("job-a"))
    clock.sleep((BOUNDS.start_within + timedelta(seconds=1)).total_seconds())
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)  # a second launch
    clock.sleep(timedelta(minutes=5).total_seconds())
    with caplog.at_level(logging.ERROR, logger="turnstile"):
        failed = warm.status("job-a")
    assert failed is not None and failed.state is JobState.FAILED
    detail = failed.detail or ""
    assert "no warm driver started within DRIVER_START_TIMEOUT_SECONDS (600 s) of the job's submit" in detail
    assert f"batch {batches.created[-1][0]}" in detail and "(a transient failure)" in detail
    [alert] = [r for r in caplog.records if getattr(r, "event", None) == "driver_launch_failed"]
    assert alert.job_id == "job-a"  # type: ignore[attr-defined]
    again = warm.status("job-a")  # read from the job's end record now: the same reason, transient
    assert again is not None and again.state is JobState.FAILED
    assert "no warm driver started within" in (again.detail or "")
    assert "did not finish" in (again.detail or "")
    late = driver(store, clock, "late")
    assert late.register()
    runs = Runs()
    serve(late, runs, lambda idle, now: "idle", clock, 1.0)
    assert runs.order == []  # withdrawn: a driver that starts after the timeout never runs it


def test_a_job_queued_while_a_driver_runs_does_not_time_out(store: MemoryStore, clock: ManualClock) -> None:
    batches = Batches()
    warm = runner(store, clock, batches, start_timeout=timedelta(minutes=2))
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    batches.states[batch_id] = JobState.RUNNING
    busy = driver(store, clock, batch_id)
    assert busy.register()
    for _ in range(4):
        clock.sleep(60)
        busy.heartbeat()
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)


def test_a_failed_create_withdraws_its_announcement_so_the_next_submit_launches(
    store: MemoryStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)

    def refused(job_id: str, batch: dataproc_v1.Batch) -> None:
        raise RuntimeError("no answer")

    batches.create = refused  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="turnstile"), pytest.raises(RuntimeError):
        warm.submit("job-a", manifest("job-a"))
    [alert] = [r for r in caplog.records if getattr(r, "event", None) == "driver_launch_failed"]
    assert (alert.levelno, alert.error) == (logging.ERROR, "no answer")  # type: ignore[attr-defined]
    assert store.list_objects(names.DRIVERS) == []
    first = launched(store)
    del batches.create
    warm.submit("job-a", manifest("job-a"))  # the retry of the submit
    assert [b for b, _ in batches.created] == [driver_batch_id("turnstile", "inbound", first + 1)]


def test_cancel_withdraws_a_queued_job_and_asks_a_running_one_to_stop(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    warm.submit("job-b", manifest("job-b"))
    ((batch_id, _),) = batches.created
    batches.states[batch_id] = JobState.RUNNING
    served = driver(store, clock, batch_id)
    assert served.register()
    claimed = served.take()
    assert claimed is not None and claimed.request.job_id == "job-a" and served.start(claimed)
    warm.cancel("job-b")
    status = warm.status("job-b")
    assert status is not None and status.state is JobState.CANCELLED
    warm.cancel("job-a")  # runs in a driver: asked to stop at its next batch boundary
    assert store.read(names.stop_name("job-a")) is not None
    assert warm.status("job-a") == JobStatus("job-a", JobState.RUNNING)  # until the driver stops it
    served.finish(claimed, Outcome.CANCELLED, "cancelled: stopped at a batch boundary, before batch '07'")
    assert warm.status("job-a") == JobStatus(
        "job-a", JobState.CANCELLED, "cancelled: stopped at a batch boundary, before batch '07'"
    )
    warm.cancel("per-job-batch")  # unknown to the spool: a batch of its own from before the switch
    assert batches.cancelled == ["per-job-batch"]
    assert batches.cancelled.count(batch_id) == 0


def claim(
    store: MemoryStore, clock: ManualClock, still_needed: Callable[[], bool] = lambda: True
) -> str | None:
    return spoollaunch.claim_launch(store, clock, BOUNDS, still_needed, lambda number: f"drv-{number}")


def number_of(driver_id: str | None) -> int:
    assert driver_id is not None
    return int(driver_id.removeprefix("drv-"))


def test_a_sequence_removed_or_garbled_by_hand_never_reuses_a_batch_id(
    store: MemoryStore, clock: ManualClock
) -> None:
    """A batch id names one batch forever (CreateBatch of a used id attaches to the old, finished
    batch): a new sequence starts from the clock's second, above every number launched before."""
    first = number_of(claim(store, clock))
    assert first >= int(clock.now().timestamp()) - 1 and launched(store) == first
    assert number_of(claim(store, clock)) == first + 1
    store.remove(names.SEQUENCE)
    clock.sleep(5)
    again = number_of(claim(store, clock))
    assert again > first + 1
    store.write(names.SEQUENCE, b"not json")
    clock.sleep(5)
    assert number_of(claim(store, clock)) > again


def test_a_submitter_that_reads_the_moved_sequence_finds_the_announced_driver_and_launches_nothing(
    store: MemoryStore, clock: ManualClock
) -> None:
    """The race of the first burst: both submitters found no driver; the first announced its driver
    and moved the sequence before the second read it. The second reads the drivers again after the
    sequence, finds the announcement, and no second batch is created."""
    batches = Batches()
    warm = runner(store, clock, batches)
    second = spoolsubmit.submit(
        store, clock, "job-b", "ds/tbl", {"manifest": manifest("job-b")}, bounds=BOUNDS
    )
    assert second.driver_needed  # read before the first submitter's launch
    warm.submit("job-a", manifest("job-a"))
    assert warm.start_driver(lambda: spoolsubmit.driver_needed(store, clock, BOUNDS)) is None
    assert len(batches.created) == 1 and len(store.list_objects(names.DRIVERS)) == 1


def test_of_two_submitters_that_read_the_same_sequence_one_announces_and_launches(
    store: MemoryStore, clock: ManualClock
) -> None:
    """Both read number N before either moved it: both try to announce N + 1, and the one whose
    create fails launches nothing (the other's record takes requests)."""
    inner: list[str | None] = []

    def racing() -> bool:  # the first caller has read the sequence: the second runs whole now
        if not inner:
            inner.append(claim(store, clock))
        return True

    outer = claim(store, clock, racing)
    assert outer is None and inner[0] is not None and launched(store) == number_of(inner[0])


class StallsOnTheSequence(MemoryStore):
    """A launcher that stops between its announce and its move of the sequence: `stalled` runs
    just before the first compare-and-swap of the sequence."""

    def __init__(self, clock: ManualClock, stalled: Callable[[], None]) -> None:
        super().__init__("spool", clock=clock)
        self.stalled: Callable[[], None] | None = stalled

    def replace(self, name: str, data: bytes, *, if_generation: int) -> int:
        if name == names.SEQUENCE and self.stalled is not None:
            stalled, self.stalled = self.stalled, None
            stalled()
        return super().replace(name, data, if_generation=if_generation)


def test_a_slot_whose_launcher_stopped_before_moving_the_sequence_is_stepped_over(clock: ManualClock) -> None:
    """The stalled launcher's announcement turns dead after `start_within`; the next submitter moves
    the sequence past it and launches the number after, and the stalled launcher, whose move then
    fails, withdraws its announcement and launches nothing."""
    later: list[str | None] = []

    def meanwhile() -> None:
        clock.sleep(BOUNDS.start_within.total_seconds() + 1)
        later.append(claim(store, clock, lambda: spoolsubmit.driver_needed(store, clock, BOUNDS)))

    store = StallsOnTheSequence(clock, lambda: None)
    first = number_of(claim(store, clock))
    store.stalled = meanwhile
    assert claim(store, clock) is None  # announced first + 1, stalled, its move failed
    assert number_of(later[0]) == first + 2 and launched(store) == first + 2
    assert (
        store.stat(names.driver_name(f"drv-{first + 1}")) is None
        or spoollaunch.read_driver(store, f"drv-{first + 1}").state is DriverState.DEAD
    )  # type: ignore[union-attr]


def test_a_status_poll_starts_no_driver_for_a_job_a_leaving_driver_listed(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    batches.states[batch_id] = JobState.RUNNING
    served = driver(store, clock, batch_id)
    assert served.register()
    listed = served.leave("rent-or-buy")  # it serves these on its way out
    assert len(listed) == 1
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)
    assert len(batches.created) == 1  # no second batch for a job the leaving driver serves
    warm.submit("job-b", manifest("job-b"))  # queued after the listing: the next driver takes it
    assert len(batches.created) == 2


def test_a_queued_jobs_status_replaces_a_driver_whose_batch_ended_without_leaving(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    served = driver(store, clock, batch_id)
    assert served.register()  # up, heartbeat fresh: it takes requests as far as the spool says
    batches.states[batch_id] = JobState.RUNNING
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)
    assert len(batches.created) == 1
    batches.states[batch_id] = JobState.FAILED  # its Spark context died: the batch ended
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)
    assert [b for b, _ in batches.created] == [
        batch_id,
        driver_batch_id("turnstile", "inbound", launched(store)),
    ]
    record = DriverRecord.decode(store.read(names.driver_name(batch_id)).data, "x")  # type: ignore[union-attr]
    assert record.state is DriverState.DEAD and "FAILED" in (record.reason or "")


def test_a_submit_replaces_a_driver_whose_batch_ended_without_leaving(
    store: MemoryStore, clock: ManualClock
) -> None:
    batches = Batches()
    warm = runner(store, clock, batches)
    warm.submit("job-a", manifest("job-a"))
    ((batch_id, _),) = batches.created
    assert driver(store, clock, batch_id).register()
    batches.states[batch_id] = JobState.CANCELLED
    warm.submit("job-b", manifest("job-b"))
    assert [b for b, _ in batches.created] == [
        batch_id,
        driver_batch_id("turnstile", "inbound", launched(store)),
    ]
