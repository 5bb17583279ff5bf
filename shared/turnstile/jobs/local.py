"""The local runner: the same PySpark job under pyspark's spark-submit, with a Hadoop Iceberg
catalog in a warehouse folder.

Each job is a folder `<home>/jobs/<job_id>/` holding its request, its state and its log. Creating
the folder is the submit (a second submit of the id finds it and attaches); a detached worker
process runs spark-submit and records the outcome, so jobs outlive the invocation that submitted
them and any later invocation reads their state from the folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from turnstile.jobs.local_spark import ensure_jars, spark_conf
from turnstile.jobs.port import JobState, JobStatus
from turnstile.settings import Settings, child_environment

REQUEST = "request.json"
STATE = "state.json"
LOG = "job.log"


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Atomically: a reader never sees half a file."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(value, indent=1))
    partial.replace(path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return loaded


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def job_environment(settings: Settings) -> dict[str, str]:
    """The variables a job reads (`Settings.from_env()` in `turnstile.spark.main`) that these
    settings give a value: its storage, project and Iceberg catalog follow the submitter's."""
    values = {
        "STORAGE_EMULATOR_HOST": settings.storage_emulator_host,
        "GOOGLE_CLOUD_PROJECT": settings.gcp_project,
        "ICEBERG_CATALOG": settings.iceberg_catalog,
        "ICEBERG_WAREHOUSE": settings.iceberg_warehouse,
    }
    return {name: value for name, value in values.items() if value}


@dataclass(frozen=True)
class LocalRunner:
    home: Path
    conf: dict[str, str]  # Spark properties of every job: jars, the Iceberg catalog, local tuning
    # What the worker and its spark-submit get on top of the environment they inherit.
    environment: Mapping[str, str]

    @staticmethod
    def from_settings(settings: Settings) -> LocalRunner:
        home = Path(settings.turnstile_home).resolve()
        jars = ensure_jars(home / "jars")
        warehouse = Path(settings.iceberg_warehouse or home / "warehouse")
        conf = spark_conf(jars, warehouse, settings.iceberg_catalog)
        return LocalRunner(home, conf, job_environment(settings))

    def job_dir(self, job_id: str) -> Path:
        return self.home / "jobs" / job_id

    def submit(self, job_id: str, manifest_uri: str) -> None:
        folder = self.job_dir(job_id)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            return  # submitted before: attach
        write_json(folder / REQUEST, {"job_id": job_id, "manifest": manifest_uri, "conf": self.conf})
        write_json(folder / STATE, {"state": JobState.PENDING.value, "submitted_at": _now()})
        with (folder / LOG).open("ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "turnstile.jobs.local_worker", str(folder)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_environment(self.environment),
                start_new_session=True,
            )
        write_json(
            folder / STATE, {"state": JobState.PENDING.value, "submitted_at": _now(), "pid": worker.pid}
        )
        threading.Thread(target=worker.wait, daemon=True).start()  # reap it, or it lingers as a zombie

    def status(self, job_id: str) -> JobStatus | None:
        state = read_json(self.job_dir(job_id) / STATE)
        if state is None:
            return None if not self.job_dir(job_id).exists() else JobStatus(job_id, JobState.PENDING)
        current = JobState(state["state"])
        pid = state.get("pid")
        if not current.finished and isinstance(pid, int) and not alive(pid):
            state = read_json(self.job_dir(job_id) / STATE) or state  # it may have just finished
            current = JobState(state["state"])
            if not current.finished:
                return JobStatus(
                    job_id,
                    JobState.FAILED,
                    f"the local job process {pid} died; see {self.job_dir(job_id) / LOG}",
                )
        return JobStatus(job_id, current, state.get("detail"))

    def cancel(self, job_id: str) -> None:
        state = read_json(self.job_dir(job_id) / STATE)
        if state is None or JobState(state["state"]).finished or not isinstance(state.get("pid"), int):
            return
        try:
            os.killpg(state["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


def _now() -> str:
    return datetime.now(UTC).isoformat()
