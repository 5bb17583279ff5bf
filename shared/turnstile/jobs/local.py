"""The local runner: the same PySpark job under pyspark's spark-submit, with a Hadoop Iceberg
catalog in a warehouse folder, run by a warm driver.

Each job is a folder `<home>/jobs/<job_id>/` holding its request, its state and its log. Creating
the folder is the submit (a second submit of the id finds it and attaches). The job itself goes to
a long-lived driver (`turnstile.spark.warm`, one spark-submit per home and Spark configuration,
started detached on first use, in `<home>/workers/<digest>/`) through its spool
(`turnstile.state.spool`), so a job pays its batches, not ≈ 9 s of JVM, session and catalog start-up.
Jobs outlive the invocation that submitted them and any process reads their state from the folder;
a job is bound to the driver it was queued to, so when that driver dies, its jobs are FAILED.
With `LOCAL_DRIVER=cold` each job is instead its own spark-submit of the job's main file
(`turnstile.jobs.local_cold`): what one job per batch costs without a warm driver, as on Dataproc.
With `LOCAL_DRIVER=spool` the runner is production's (`jobs.warm_runner`, requests in the bucket's
spool) and this one only `launch`es its driver, a spark-submit of its own, where Dataproc creates a
batch (`<home>/drivers/<batch id>/`, read by `status` and ended by `cancel` like a cold job).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from turnstile.config.settings import Settings, child_environment
from turnstile.jobs.local_cold import FINISHED, LOG, STARTED
from turnstile.jobs.local_spark import ensure_jars, spark_conf
from turnstile.jobs.local_worker import failure_detail, job_main_file, spark_submit, warm_driver_file
from turnstile.jobs.port import JobState, JobStatus
from turnstile.state.spool import (
    WORKER,
    alive,
    enqueue,
    entry_name,
    locked,
    lost,
    prepare,
    read_json,
    withdraw,
    write_json,
)

__all__ = [
    "FINISHED",
    "LOG",
    "REQUEST",
    "STARTED",
    "STATE",
    "LocalRunner",
    "alive",
    "read_json",
    "write_json",
]

REQUEST = "request.json"
# written by the submitter: PENDING (with the pid of the driver, or of a cold job) or CANCELLED
STATE = "state.json"
# STARTED and FINISHED are written by the driver (or a cold job's `local_cold`) when the job starts
# and when it ends, with its exit code; LOG is the job's output.
DRIVER_LOG = "driver.log"
DRIVERS = "drivers"  # under the home: the Spark applications `launch` started (spool drivers)


def job_environment(settings: Settings) -> dict[str, str]:
    """The variables a job reads (`Settings.from_env()` in `turnstile.spark.run`) that these
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
    service = "spark-submit"  # what a launched driver is (`warm_runner.Batches`)

    home: Path
    conf: dict[str, str]  # Spark properties of every job: jars, the Iceberg catalog, local tuning
    # What the driver and its spark-submit get on top of the environment they inherit.
    environment: Mapping[str, str]
    idle_seconds: float = 300.0  # a driver with nothing to do this long exits
    cold: bool = False  # each job its own spark-submit instead of the warm driver (LOCAL_DRIVER=cold)

    @staticmethod
    def from_settings(settings: Settings) -> LocalRunner:
        home = Path(settings.turnstile_home).resolve()
        jars = ensure_jars(home / "jars")
        warehouse = Path(settings.iceberg_warehouse or home / "warehouse")
        conf = spark_conf(jars, warehouse, settings.iceberg_catalog)
        return LocalRunner(
            home,
            conf,
            job_environment(settings),
            settings.local_driver_idle_seconds,
            cold=settings.local_driver == "cold",
        )

    def job_dir(self, job_id: str) -> Path:
        return self.home / "jobs" / job_id

    def _folder(self, job_id: str) -> Path:
        """A job's folder, or that of an application `launch` started under this id."""
        launched = self.home / DRIVERS / job_id
        return launched if launched.is_dir() else self.job_dir(job_id)

    def spool(self) -> Path:
        """One driver per Spark configuration and environment: a job never runs in a session
        built for other settings."""
        key = json.dumps([self.conf, dict(self.environment)], sort_keys=True)
        return self.home / "workers" / hashlib.sha256(key.encode()).hexdigest()[:12]

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        folder = self.job_dir(job_id)
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            return  # submitted before: attach
        write_json(folder / REQUEST, {"job_id": job_id, "manifest": manifest_uri, "conf": self.conf})
        if self.cold:
            self._start_cold(
                folder, job_main_file(), ["--manifest", manifest_uri, "--stage-to", str(folder / "staged")]
            )
            return
        spool = self.spool()
        with locked(spool):
            pid = self._driver(spool)
            name = entry_name()
            state = {
                "state": JobState.PENDING.value,
                "submitted_at": _now(),
                "pid": pid,
                "queued_as": name,
                "spool": str(spool),
            }
            write_json(folder / STATE, state)
            request = {
                "job_id": job_id,
                "manifest": manifest_uri,
                "stage_to": str(folder / "staged"),
                "log": str(folder / LOG),
                "started": str(folder / STARTED),
                "finished": str(folder / FINISHED),
                "worker": pid,
            }
            enqueue(spool, name, request)

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None:
        """`main` with `args` in a Spark application of its own, under `batch_id` (the spool's warm
        driver, where Dataproc creates a batch); a second launch of the id attaches."""
        folder = self.home / DRIVERS / batch_id
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            return
        request = {
            "batch_id": batch_id,
            "main": main,
            "args": args,
            "labels": dict(labels),
            "conf": self.conf,
        }
        write_json(folder / REQUEST, request)
        self._start_cold(folder, Path(main), args)

    def _start_cold(self, folder: Path, main: Path, args: Sequence[str]) -> None:
        """`main` in a Spark application of its own (`turnstile.jobs.local_cold` records its start
        and end), in a process group of its own so that `cancel` ends all of it."""
        command = [sys.executable, "-m", "turnstile.jobs.local_cold", str(folder), "--", str(spark_submit())]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        command += [str(main), *args]
        submitted = _now()
        job = self._spawn(command, folder / LOG)
        write_json(
            folder / STATE, {"state": JobState.PENDING.value, "submitted_at": submitted, "pid": job.pid}
        )

    def _spawn(self, command: list[str], log: Path) -> subprocess.Popen[bytes]:
        """`command` detached in a process group of its own (so `cancel` ends all of it), its
        output appended to `log`, reaped when it exits."""
        with log.open("ab") as output:
            process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_environment(self.environment),
                start_new_session=True,
            )
        threading.Thread(target=process.wait, daemon=True).start()  # or it lingers as a zombie
        return process

    def _driver(self, spool: Path) -> int:
        """The pid (and process group) of the spool's live driver, started now if there is none.
        Called under the spool's lock."""
        worker = read_json(spool / WORKER)
        if worker is not None and isinstance(worker.get("pid"), int) and alive(worker["pid"]):
            return int(worker["pid"])
        prepare(spool)
        command = [str(spark_submit())]
        for key, value in self.conf.items():
            command += ["--conf", f"{key}={value}"]
        command += [str(warm_driver_file()), str(spool), str(self.idle_seconds)]
        driver = self._spawn(command, spool / DRIVER_LOG)
        write_json(spool / WORKER, {"pid": driver.pid, "started_at": _now()})
        return driver.pid

    def status(self, job_id: str) -> JobStatus | None:
        folder = self._folder(job_id)
        state = read_json(folder / STATE)
        if state is None:
            return None if not folder.exists() else JobStatus(job_id, JobState.PENDING)
        if JobState(state["state"]).finished:
            return JobStatus(job_id, JobState(state["state"]), state.get("detail"))
        finished = read_json(folder / FINISHED)
        pid = state.get("pid")
        if finished is None and isinstance(pid, int) and not alive(pid):
            finished = read_json(folder / FINISHED)  # it may have just finished
            if finished is None:
                alone = self.cold or folder.parent.name == DRIVERS
                where = folder / LOG if alone else f"{folder / LOG} and {self.spool() / DRIVER_LOG}"
                return JobStatus(job_id, JobState.FAILED, f"the local Spark driver {pid} died; see {where}")
        if finished is not None:
            code = int(finished["exit_code"])
            if code == 0:
                return JobStatus(job_id, JobState.SUCCEEDED)
            return JobStatus(job_id, JobState.FAILED, failure_detail(folder / LOG, code))
        if (folder / STARTED).exists():
            return JobStatus(job_id, JobState.RUNNING)
        return _lost(job_id, folder, state) or JobStatus(job_id, JobState.PENDING)

    def cancel(self, job_id: str) -> None:
        """A queued job is withdrawn (CANCELLED); a running one ends with its driver (FAILED):
        Spark cannot stop one Python job inside a driver, and the next job starts a new one."""
        folder = self._folder(job_id)
        state = read_json(folder / STATE)
        current = self.status(job_id)
        if state is None or current is None or current.state.finished:
            return
        if isinstance(state.get("queued_as"), str):
            with locked(self.spool()):  # withdrawn and CANCELLED at once: `status` never sees it lost
                if withdraw(self.spool(), state["queued_as"]):
                    write_json(
                        folder / STATE, state | {"state": JobState.CANCELLED.value, "detail": "cancelled"}
                    )
                    return
        if isinstance(state.get("pid"), int):
            try:
                os.killpg(state["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop_drivers(self) -> None:
        stop_drivers(self.home)


def _lost(job_id: str, folder: Path, state: dict[str, Any]) -> JobStatus | None:
    """FAILED for a warm job whose request is gone from its spool although the job neither started
    nor finished (a driver whose JVM had died took it): nothing would ever run it."""
    spool, name = state.get("spool"), state.get("queued_as")
    if not isinstance(spool, str) or not isinstance(name, str):
        return None
    with locked(Path(spool)):
        if not lost(Path(spool), name):
            return None
        now = read_json(folder / STATE) or state  # withdrawn by `cancel`: CANCELLED
    if JobState(now["state"]).finished or (folder / STARTED).exists() or (folder / FINISHED).exists():
        return None  # it ended or started meanwhile: the next read says how
    return JobStatus(
        job_id,
        JobState.FAILED,
        "its request left the local Spark driver's queue but the job never started; "
        f"see {Path(spool) / DRIVER_LOG}",
    )


def stop_drivers(home: Path) -> None:
    """End every warm driver under this home, and every spool driver it launched (the local stack's
    stop; tests)."""
    for launched in sorted((home / DRIVERS).glob(f"*/{STATE}")):
        _end_group(launched)
    for worker_file in sorted((home / "workers").glob(f"*/{WORKER}")):
        _end_group(worker_file)
        worker_file.unlink(missing_ok=True)


def _end_group(record: Path) -> None:
    """SIGTERM to the process group the record's `pid` leads, if it is still there."""
    found = read_json(record)
    if found is not None and isinstance(found.get("pid"), int):
        try:
            os.killpg(found["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass


def _now() -> str:
    return datetime.now(UTC).isoformat()
