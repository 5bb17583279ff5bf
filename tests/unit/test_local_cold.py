"""A cold local job's process: it records the job's start and end around the command it runs, so
the runner reads a cold job's state as it reads a warm one's."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from turnstile.jobs import local_cold
from turnstile.jobs.local import (
    DRIVERS,
    FINISHED,
    LOG,
    REQUEST,
    STARTED,
    STATE,
    LocalRunner,
    read_json,
    stop_drivers,
    write_json,
)
from turnstile.jobs.port import JobState, JobStatus
from turnstile.state.spool import enqueue, entry_name, take


def test_it_records_the_start_the_output_and_the_exit_code(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, {}, {}, cold=True)
    folder = runner.job_dir("c1")
    folder.mkdir(parents=True)
    write_json(folder / STATE, {"state": "PENDING", "pid": os.getpid()})
    code = local_cold.main([str(folder), "--", sys.executable, "-c", "print('applied'); raise SystemExit(3)"])
    assert code == 3
    assert read_json(folder / STARTED)["pid"] == os.getpid()  # type: ignore[index]
    assert read_json(folder / FINISHED)["exit_code"] == 3  # type: ignore[index]
    assert "applied" in (folder / LOG).read_text()
    status = runner.status("c1")
    assert status is not None and status.state is JobState.FAILED
    assert "exited 3" in (status.detail or "")


def test_a_call_without_a_command_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert local_cold.main([str(tmp_path)]) == 2
    assert "usage: python -m turnstile.jobs.local_cold JOB_FOLDER -- COMMAND" in capsys.readouterr().err
    assert not (tmp_path / STARTED).exists()


def test_a_warm_job_whose_request_left_the_queue_unstarted_is_failed(tmp_path: Path) -> None:
    """Its request taken and dropped by a driver whose JVM had died: nothing would ever run the
    job, so it is FAILED (a transient failure for the protocol), not PENDING forever."""
    runner = LocalRunner(tmp_path, {}, {})
    spool = runner.spool()
    name = entry_name()
    enqueue(spool, name, {"job_id": "w1", "worker": os.getpid()})
    folder = runner.job_dir("w1")
    folder.mkdir(parents=True)
    state = {"state": "PENDING", "pid": os.getpid(), "queued_as": name, "spool": str(spool)}
    write_json(folder / STATE, state)
    assert runner.status("w1") == JobStatus("w1", JobState.PENDING)
    claimed = take(spool)  # taken: still PENDING until the driver writes started.json
    assert claimed is not None and runner.status("w1") == JobStatus("w1", JobState.PENDING)
    claimed[0].unlink()
    status = runner.status("w1")
    assert status is not None and status.state is JobState.FAILED
    assert "never started" in (status.detail or "")
    write_json(folder / FINISHED, {"exit_code": 0})  # it ran after all: its end is what counts
    assert runner.status("w1") == JobStatus("w1", JobState.SUCCEEDED)


def test_a_withdrawn_warm_job_is_cancelled_not_lost(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, {}, {})
    name = entry_name()
    enqueue(runner.spool(), name, {"job_id": "w2", "worker": os.getpid()})
    folder = runner.job_dir("w2")
    folder.mkdir(parents=True)
    state = {"state": "PENDING", "pid": os.getpid(), "queued_as": name, "spool": str(runner.spool())}
    write_json(folder / STATE, state)
    runner.cancel("w2")
    assert runner.status("w2") == JobStatus("w2", JobState.CANCELLED, "cancelled")


def _fake_spark_submit(tmp_path: Path) -> Path:
    """Stands for spark-submit: drops the `--conf` pairs and runs the main file with this Python."""
    script = tmp_path / "spark-submit"
    script.write_text(f'#!/bin/sh\nwhile [ "$1" = "--conf" ]; do shift 2; done\nexec {sys.executable} "$@"\n')
    script.chmod(0o755)
    return script


def _wait(runner: LocalRunner, batch_id: str, state: JobState) -> JobStatus:
    for _ in range(200):
        status = runner.status(batch_id)
        if status is not None and status.state is state:
            return status
        time.sleep(0.05)
    raise AssertionError(f"{batch_id} never reached {state}: {runner.status(batch_id)}")


def test_a_launched_application_is_read_and_ended_like_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`launch` is the local stack's CreateBatch for the spool's warm driver: `status` reads the
    application as Dataproc's batch state, a second launch of the id attaches, `cancel` ends it."""
    monkeypatch.setattr("turnstile.jobs.local.spark_submit", lambda: _fake_spark_submit(tmp_path))
    runner = LocalRunner(tmp_path / "home", {"spark.master": "local[1]"}, {})
    main = tmp_path / "driver.py"
    main.write_text(
        "import sys, time\nprint('driver', *sys.argv[1:], flush=True)\ntime.sleep(float(sys.argv[2]))\n"
    )
    assert runner.status("drv-1") is None
    runner.launch("drv-1", str(main), ["--sleep", "0.2"], {"turnstile-driver": "true"})
    runner.launch("drv-1", str(main), ["--sleep", "99"], {"turnstile-driver": "true"})  # attaches
    assert _wait(runner, "drv-1", JobState.SUCCEEDED) == JobStatus("drv-1", JobState.SUCCEEDED)
    folder = tmp_path / "home" / DRIVERS / "drv-1"
    assert "driver --sleep 0.2" in (folder / LOG).read_text()
    assert read_json(folder / REQUEST)["labels"] == {"turnstile-driver": "true"}  # type: ignore[index]

    runner.launch("drv-2", str(main), ["--sleep", "60"], {})
    _wait(runner, "drv-2", JobState.RUNNING)
    runner.cancel("drv-2")
    assert _wait(runner, "drv-2", JobState.FAILED).state is JobState.FAILED

    runner.launch("drv-3", str(main), ["--sleep", "60"], {})
    _wait(runner, "drv-3", JobState.RUNNING)
    stop_drivers(tmp_path / "home")  # the local stack's stop ends launched drivers too
    assert _wait(runner, "drv-3", JobState.FAILED).state is JobState.FAILED
