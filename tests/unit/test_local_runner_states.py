"""How the local runner reads a job's state from its folder (no Spark: the files a driver writes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from turnstile.jobs.local import FINISHED, LOG, STARTED, STATE, LocalRunner, write_json
from turnstile.jobs.port import JobState


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _job(runner: LocalRunner, job_id: str, pid: int) -> Path:
    folder = runner.job_dir(job_id)
    folder.mkdir(parents=True)
    write_json(folder / STATE, {"state": "PENDING", "pid": pid, "queued_as": "x.json"})
    return folder


def test_queued_running_and_finished_jobs_of_a_live_driver(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, {}, {})
    folder = _job(runner, "j1", os.getpid())  # a live process stands in for the driver
    assert runner.status("j1").state is JobState.PENDING  # type: ignore[union-attr]
    write_json(folder / STARTED, {"pid": os.getpid()})
    assert runner.status("j1").state is JobState.RUNNING  # type: ignore[union-attr]
    write_json(folder / FINISHED, {"exit_code": 0})
    assert runner.status("j1").state is JobState.SUCCEEDED  # type: ignore[union-attr]
    assert runner.status("unknown") is None


def test_a_failed_job_reports_its_own_failure_line(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, {}, {})
    folder = _job(runner, "j2", os.getpid())
    (folder / LOG).write_text("noise\nturnstile job failed: batch 'h01': bad rows\n")
    write_json(folder / FINISHED, {"exit_code": 1})
    status = runner.status("j2")
    assert status is not None and status.state is JobState.FAILED
    assert status.detail == "batch 'h01': bad rows"


def test_a_job_whose_driver_died_is_failed_unless_it_had_finished(tmp_path: Path) -> None:
    runner = LocalRunner(tmp_path, {}, {})
    dead = _dead_pid()
    _job(runner, "j3", dead)
    status = runner.status("j3")
    assert status is not None and status.state is JobState.FAILED
    assert f"driver {dead} died" in (status.detail or "")
    finished = _job(runner, "j4", dead)
    write_json(finished / FINISHED, {"exit_code": 0})
    assert runner.status("j4").state is JobState.SUCCEEDED  # type: ignore[union-attr]
