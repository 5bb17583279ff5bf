"""The local runner: the real job under spark-submit, against fake-gcs-server, outliving its submitter."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnstile.config.load_config import LoadConfig
from turnstile.jobs.local import STATE, LocalRunner, read_json
from turnstile.jobs.local_spark import spark_conf
from turnstile.jobs.port import JobState, JobStatus
from turnstile.local.emulator import Emulator
from turnstile.state.records import BatchOutcome, BatchResult, JobDone, Manifest, ManifestBatch
from turnstile.store.gcs import GcsStore

pytestmark = pytest.mark.spark


def _batch(store: GcsStore, table: str, rel: str, generation: int, rows: str) -> ManifestBatch:
    name = f"ds/{table}/{rel}/part-0.csv"
    store.write(name, f"id,v\n{rows}".encode())
    return ManifestBatch(
        dataset="ds",
        table=table,
        table_prefix=f"ds/{table}",
        rel=rel,
        success_generation=generation,
        data_uris=(f"gs://{store.bucket}/{name}",),
        load=LoadConfig(),
        config_digest="d",
        result=f"ds/{table}/_turnstile/results/{rel}/{generation}.json",
        failed_prefix=f"ds/{table}/_failed/{rel}/",
    )


def _manifest(store: GcsStore, job_id: str, batches: list[ManifestBatch]) -> str:
    table = batches[0].table_prefix
    manifest = Manifest(
        job_id=job_id,
        bucket=store.bucket,
        batches=tuple(batches),
        done_signal=f"{table}/_turnstile/jobs/{job_id}.done",
        ordered=True,
    )
    store.write(f"{table}/_turnstile/jobs/{job_id}.manifest.json", manifest.encode())
    return f"gs://{store.bucket}/{table}/_turnstile/jobs/{job_id}.manifest.json"


def _wait(runner: LocalRunner, job_id: str, timeout: float = 180) -> JobStatus:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = runner.status(job_id)
        assert status is not None
        if status.state.finished:
            return status
        time.sleep(0.3)
    raise AssertionError(f"{job_id} did not finish in {timeout}s: {runner.status(job_id)}")


@pytest.fixture
def runner(
    tmp_path: Path,
    iceberg_jars: list[Path],
    warehouse: Path,
    gcs_emulator: Emulator,
) -> Iterator[LocalRunner]:
    # Given to the job process, not set in this one: it reaches the emulator only through these.
    environment = {"STORAGE_EMULATOR_HOST": gcs_emulator.url, "ICEBERG_CATALOG": "local"}
    runner = LocalRunner(tmp_path / "home", spark_conf(iceberg_jars, warehouse, "local"), environment)
    yield runner
    runner.stop_drivers()


def test_a_job_runs_under_spark_submit_and_a_second_submit_attaches(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    batches = [
        _batch(gcs_store, "runner_a", "h01", 11, "1,a\n2,b\n"),
        _batch(gcs_store, "runner_a", "h02", 12, "3,c\n"),
    ]
    uri = _manifest(gcs_store, "local-job-1", batches)
    assert runner.status("local-job-1") is None
    runner.submit("local-job-1", uri)
    first_pid = read_json(runner.job_dir("local-job-1") / STATE)["pid"]  # type: ignore[index]
    runner.submit("local-job-1", uri)  # attaches: no second process
    assert read_json(runner.job_dir("local-job-1") / STATE)["pid"] == first_pid  # type: ignore[index]
    status = _wait(runner, "local-job-1")
    assert status.state is JobState.SUCCEEDED, (runner.job_dir("local-job-1") / "job.log").read_text()[-3000:]
    done = JobDone.decode(gcs_store.read("ds/runner_a/_turnstile/jobs/local-job-1.done").data, "done")  # type: ignore[union-attr]
    assert done.outcomes == {"h01": BatchOutcome.COMMITTED, "h02": BatchOutcome.COMMITTED}
    result = BatchResult.decode(gcs_store.read(batches[0].result).data, "result")  # type: ignore[union-attr]
    assert (result.rows_read, result.rows_written) == (2, 2)
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.runner_a").collect())
    assert rows == [(1, "a"), (2, "b"), (3, "c")]


def test_a_killed_job_is_rerun_without_duplicating_a_row(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    batches = [_batch(gcs_store, "runner_b", f"h{i:02d}", 100 + i, f"{i},x\n") for i in range(1, 6)]
    uri = _manifest(gcs_store, "local-job-2", batches)
    runner.submit("local-job-2", uri)
    deadline = time.monotonic() + 180
    while gcs_store.stat(batches[0].result) is None:  # kill it once the first batch has committed
        assert time.monotonic() < deadline, (runner.job_dir("local-job-2") / "job.log").read_text()[-3000:]
        time.sleep(0.1)
    pid = read_json(runner.job_dir("local-job-2") / STATE)["pid"]  # type: ignore[index]
    os.killpg(pid, signal.SIGKILL)
    status = _wait(runner, "local-job-2")
    assert status.state is JobState.FAILED
    assert "died" in (status.detail or "")
    rerun = _manifest(gcs_store, "local-job-3", batches)
    runner.submit("local-job-3", rerun)
    assert _wait(runner, "local-job-3").state is JobState.SUCCEEDED
    done = JobDone.decode(gcs_store.read("ds/runner_b/_turnstile/jobs/local-job-3.done").data, "done")  # type: ignore[union-attr]
    assert done.outcomes["h01"] is BatchOutcome.SKIPPED
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.runner_b").collect())
    assert rows == [(i, "x") for i in range(1, 6)]


def _driver_pid(runner: LocalRunner, job_id: str) -> int:
    """The pid the driver wrote into the job's log when it started the job."""
    log = (runner.job_dir(job_id) / "job.log").read_text()
    found = re.search(r"turnstile local driver pid (\d+): job (\d+) of this driver", log)
    assert found, log[-3000:]
    return int(found.group(1))


def test_jobs_run_one_after_another_in_one_warm_driver_and_a_queued_job_can_be_withdrawn(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    first = _manifest(gcs_store, "warm-1", [_batch(gcs_store, "warm_a", "h01", 21, "1,a\n")])
    second = _manifest(gcs_store, "warm-2", [_batch(gcs_store, "warm_a", "h02", 22, "2,b\n")])
    withdrawn = _batch(gcs_store, "warm_a", "h03", 23, "3,c\n")
    third = _manifest(gcs_store, "warm-3", [withdrawn])
    runner.submit("warm-1", first)
    runner.submit("warm-2", second)
    runner.submit("warm-3", third)
    runner.cancel("warm-3")  # still queued behind the others: withdrawn, never run
    assert runner.status("warm-3") == JobStatus("warm-3", JobState.CANCELLED, "cancelled")
    for job_id in ("warm-1", "warm-2"):
        assert _wait(runner, job_id).state is JobState.SUCCEEDED, (
            runner.job_dir(job_id) / "job.log"
        ).read_text()[-3000:]
    assert _driver_pid(runner, "warm-1") == _driver_pid(runner, "warm-2")  # one JVM for both
    assert "job 2 of this driver" in (runner.job_dir("warm-2") / "job.log").read_text()
    assert gcs_store.stat(withdrawn.result) is None
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.warm_a").collect())
    assert rows == [(1, "a"), (2, "b")]


def test_a_dead_driver_fails_its_jobs_and_the_next_submit_starts_a_new_one(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    running = [_batch(gcs_store, "warm_b", f"h{i:02d}", 200 + i, f"{i},x\n") for i in range(1, 4)]
    runner.submit("dies-1", _manifest(gcs_store, "dies-1", running))
    # The driver runs two jobs at once: a second, longer one fills the other slot...
    beside = [_batch(gcs_store, "warm_c", f"h{i:02d}", 300 + i, f"{i},z\n") for i in range(1, 9)]
    runner.submit("dies-2", _manifest(gcs_store, "dies-2", beside))
    # ...so this one waits in the queue.
    queued = _manifest(gcs_store, "dies-3", [_batch(gcs_store, "warm_b", "h09", 209, "9,y\n")])
    runner.submit("dies-3", queued)
    deadline = time.monotonic() + 180
    while gcs_store.stat(running[0].result) is None:  # the first job is inside the driver
        assert time.monotonic() < deadline, (runner.job_dir("dies-1") / "job.log").read_text()[-3000:]
        time.sleep(0.1)
    pid = read_json(runner.job_dir("dies-1") / STATE)["pid"]  # type: ignore[index]
    assert read_json(runner.job_dir("dies-3") / STATE)["pid"] == pid  # type: ignore[index]
    os.killpg(pid, signal.SIGKILL)
    for job_id in ("dies-1", "dies-2", "dies-3"):
        status = _wait(runner, job_id)
        assert status.state is JobState.FAILED
        assert f"driver {pid} died" in (status.detail or "")
    runner.submit("dies-4", _manifest(gcs_store, "dies-4", running))
    assert _wait(runner, "dies-4").state is JobState.SUCCEEDED
    assert _driver_pid(runner, "dies-4") != pid
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.warm_b").collect())
    assert rows == [(i, "x") for i in range(1, 4)]  # the queued job never ran in the new driver


def test_two_jobs_run_side_by_side_each_with_its_own_batch_view(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    """Two jobs in the driver at once, on tables of their own and on one table (an unordered
    table's jobs may overlap): each writes its own rows, each commit tagged by its own job."""
    jobs = {
        "side-1": [_batch(gcs_store, "side_a", f"h{i:02d}", 400 + i, f"{i},a\n") for i in range(1, 5)],
        "side-2": [_batch(gcs_store, "side_b", f"h{i:02d}", 500 + i, f"{i},b\n") for i in range(1, 5)],
        "side-3": [_batch(gcs_store, "side_b", f"u{i:02d}", 600 + i, f"{10 + i},b\n") for i in range(1, 5)],
    }
    for job_id, batches in jobs.items():
        runner.submit(job_id, _manifest(gcs_store, job_id, batches))
    for job_id in jobs:
        assert _wait(runner, job_id).state is JobState.SUCCEEDED, (
            runner.job_dir(job_id) / "job.log"
        ).read_text()[-3000:]
    assert len({_driver_pid(runner, job_id) for job_id in jobs}) == 1
    side_a = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.side_a").collect())
    assert side_a == [(i, "a") for i in range(1, 5)]
    side_b = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.side_b").collect())
    assert side_b == sorted([(i, "b") for i in range(1, 5)] + [(10 + i, "b") for i in range(1, 5)])
    tags = {
        r["rel"]: r["job"]
        for r in spark.sql(
            "SELECT summary['turnstile.rel'] AS rel, summary['turnstile.job-id'] AS job "
            "FROM local.ds.side_b.snapshots"
        ).collect()
    }
    assert tags == {f"h{i:02d}": "side-2" for i in range(1, 5)} | {f"u{i:02d}": "side-3" for i in range(1, 5)}


def test_cold_mode_runs_each_job_in_a_spark_application_of_its_own(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    cold = dataclasses.replace(runner, cold=True)
    first = _manifest(gcs_store, "cold-1", [_batch(gcs_store, "cold_a", "h01", 31, "1,a\n")])
    second = _manifest(gcs_store, "cold-2", [_batch(gcs_store, "cold_a", "h02", 32, "2,b\n")])
    cold.submit("cold-1", first)
    assert _wait(cold, "cold-1").state is JobState.SUCCEEDED, (
        cold.job_dir("cold-1") / "job.log"
    ).read_text()[-3000:]
    cold.submit("cold-2", second)
    assert _wait(cold, "cold-2").state is JobState.SUCCEEDED, (
        cold.job_dir("cold-2") / "job.log"
    ).read_text()[-3000:]
    pids = [read_json(cold.job_dir(j) / STATE)["pid"] for j in ("cold-1", "cold-2")]  # type: ignore[index]
    assert pids[0] != pids[1]
    for job_id in ("cold-1", "cold-2"):
        log = (cold.job_dir(job_id) / "job.log").read_text()
        assert "turnstile local driver" not in log  # not a warm driver's job
        assert read_json(cold.job_dir(job_id) / "finished.json")["exit_code"] == 0  # type: ignore[index]
    assert not (cold.home / "workers").exists()  # no warm driver was started
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.cold_a").collect())
    assert rows == [(1, "a"), (2, "b")]


def _group(pgid: int) -> list[int]:
    """The live (not zombie) processes of a process group."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return found


def test_a_driver_whose_jvm_is_killed_between_jobs_leaves_the_next_job_to_the_new_driver(
    runner: LocalRunner, gcs_store: GcsStore, spark: Any
) -> None:
    """kill -9 of the driver's JVM alone orphans its Python side: that must exit, not take (and
    drop) the request the runner queues to the driver it starts next."""
    runner.submit(
        "orphan-1", _manifest(gcs_store, "orphan-1", [_batch(gcs_store, "orphan_a", "h01", 41, "1,a\n")])
    )
    assert _wait(runner, "orphan-1").state is JobState.SUCCEEDED
    pid = read_json(runner.job_dir("orphan-1") / STATE)["pid"]  # type: ignore[index]
    assert len(_group(pid)) > 1  # the JVM and its Python side
    os.kill(pid, signal.SIGKILL)  # the JVM only, as a crash or the OOM killer does
    deadline = time.monotonic() + 30
    while _group(pid):
        assert time.monotonic() < deadline, f"the driver's Python side outlived its JVM: {_group(pid)}"
        time.sleep(0.2)
    runner.submit(
        "orphan-2", _manifest(gcs_store, "orphan-2", [_batch(gcs_store, "orphan_a", "h02", 42, "2,b\n")])
    )
    assert _wait(runner, "orphan-2").state is JobState.SUCCEEDED
    assert _driver_pid(runner, "orphan-2") != pid
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.orphan_a").collect())
    assert rows == [(1, "a"), (2, "b")]
