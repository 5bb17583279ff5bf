"""Contenders (a), (b) and (b'): turnstile on the real local stack (fake-gcs-server, the function
hosts, the event bridge, local jobs: in the warm driver, or with `cold` each its own spark-submit),
and the start-up cost of one local job.

The tables of a run are ordered (`_config/ORDERME`) and read with the workload's schema; (a) keeps
the default `max_batches_per_job`, (b) and (b') set it to 1 in `load.json` (one job per batch). Upstream
uploads the batches out of order while `START_BACKFILL_FILENAME` holds the tables, as a backfill
uploaded in parallel is meant to be; once every batch is queued the gate files are written and the
clock runs until the last batch is committed (read back from the Iceberg snapshots). The gate keeps
a batch from arriving after a later one was applied (which turnstile refuses, stopping the table)
and gives turnstile the same start as the other contenders: every file in place.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from turnstile.config.load_config import LoadConfig
from turnstile.jobs.local import DRIVERS, FINISHED, STATE, LocalRunner, read_json
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions, settings_for
from turnstile.local.stackinfo import StackInfo
from turnstile.names import driverspool
from turnstile.state.records import BatchResult, Lock, LockState, Manifest, ManifestBatch
from turnstile.state.spoolrecords import JobFinished, JobStarted, Submitted
from turnstile.store.gcs import GcsStore, make_client
from turnstile_dev.bench.machine import CpuMeter
from turnstile_dev.bench.workload import GATE, SCHEMA, Workload

CATALOG = "turnstile"
SPOOL_POLL_SECONDS = 0.1  # an idle spool driver lists the requests this often (DRIVER_POLL_SECONDS)


@dataclass
class JobRecord:
    job_id: str
    submitted: float  # epoch seconds
    finished: float
    state: str
    started: float = 0.0  # with `spool`: when a driver started it (0: not recorded)

    @property
    def seconds(self) -> float:
        return self.finished - self.submitted


@dataclass
class StackRun:
    label: str
    dataset: str
    workload: Workload
    max_batches_per_job: int | None
    upload_seconds: float = 0.0
    queued_seconds: float = 0.0  # from the first upload until every batch was queued
    gate_opened: float = 0.0  # epoch seconds: the clock starts
    settled: float = 0.0  # epoch seconds: every lock free, every backlog empty (polled)
    events_delivered: int = 0  # by the bridge, upload to settled: the function invocations
    cpu_seconds: float = 0.0  # of the whole machine, gate opened to settled
    sweeper_restarts: int = 0  # subscribers only the sweeper woke (the done signal did not)
    jobs: list[JobRecord] = field(default_factory=list)
    drivers: int = 0  # with `spool`: the drivers launched (Spark applications) while it ran
    batch_seconds: list[float] = field(default_factory=list)  # inside the jobs, per batch

    def table_jobs(self) -> dict[str, list[JobRecord]]:
        """Each table's jobs in submission order (job ids name their table)."""
        found: dict[str, list[JobRecord]] = {}
        for t in range(self.workload.tables):
            slug = f"-{self.dataset}-{self.workload.table(t)}-"
            found[self.workload.table(t)] = sorted(
                (j for j in self.jobs if slug in j.job_id), key=lambda j: j.submitted
            )
        return found

    def notice_gaps(self) -> list[float]:
        """Per job but the last of its table: seconds from its end to the next job's submission,
        i.e. how long the protocol took to notice the end and start the next job."""
        gaps = []
        for jobs in self.table_jobs().values():
            gaps += [b.submitted - a.finished for a, b in itertools.pairwise(jobs)]
        return gaps

    def first_submit(self) -> float:
        """Seconds from the gates opening to the first job's submission."""
        return min((j.submitted for j in self.jobs), default=self.gate_opened) - self.gate_opened

    def first_start(self) -> float | None:
        """With `spool`: seconds from the gates opening until a driver started the first job (the
        function's submit, then the launch and start-up of a driver); None when not recorded."""
        started = [j.started for j in self.jobs if j.started]
        return min(started) - self.gate_opened if started else None

    @property
    def tables(self) -> list[str]:
        return [f"{CATALOG}.{self.dataset}.{self.workload.table(t)}" for t in range(self.workload.tables)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "dataset": self.dataset,
            "tables": self.workload.tables,
            "batches_per_table": self.workload.batches,
            "max_batches_per_job": self.max_batches_per_job,
            "upload_seconds": round(self.upload_seconds, 2),
            "queued_seconds": round(self.queued_seconds, 2),
            "settled_seconds": round(self.settled - self.gate_opened, 2),
            "events_delivered": self.events_delivered,
            "sweeper_restarts": self.sweeper_restarts,
            "cpu_seconds": round(self.cpu_seconds, 1),
            "jobs": len(self.jobs),
            "job_seconds": [round(j.seconds, 2) for j in self.jobs],
            "first_submit_seconds": round(self.first_submit(), 2),
            "first_start_seconds": None if (first := self.first_start()) is None else round(first, 2),
            "notice_gaps_seconds": [round(g, 2) for g in self.notice_gaps()],
            "batch_seconds_in_jobs": round(sum(self.batch_seconds), 2),
        }


class TurnstileStack:
    """One local stack for both runs; `stop()` when done."""

    def __init__(
        self,
        home: Path,
        sweep_every: float,
        *,
        cold: bool = False,
        spool: bool = False,
        warehouse: Path | None = None,
    ) -> None:
        """`cold`: every job its own spark-submit (`LOCAL_DRIVER=cold`), not the warm driver's;
        `spool`: production's path, jobs queued in the bucket's spool for the warm driver of
        DRIVER=warm (`LOCAL_DRIVER=spool`, polling every `SPOOL_POLL_SECONDS`); `warehouse`:
        another stack's, so one Spark session reads both stacks' tables."""
        self.home = home
        self.sweep_every = sweep_every
        self.cold = cold
        self.spool = spool
        # (a)'s warm driver is the local folder spool's: (s) is production's path beside it.
        environment = {"START_BACKFILL_FILENAME": GATE, "LOCAL_DRIVER": "warm"}
        if cold:
            environment["LOCAL_DRIVER"] = "cold"
        if spool:
            environment |= {
                "LOCAL_DRIVER": "spool",
                "DRIVER_POLL_SECONDS": str(SPOOL_POLL_SECONDS),
                "LOCAL_DRIVER_PRICES": "dataproc",  # production's stay-up decisions
            }
        if warehouse is not None:
            environment["ICEBERG_WAREHOUSE"] = str(warehouse)
        self._warehouse = warehouse
        self.stack = Stack(StackOptions(home=home, sweep_every=sweep_every, environment=environment))
        self.info: StackInfo | None = None
        self.store: GcsStore | None = None

    def start(self) -> StackInfo:
        self.info = self.stack.start()
        self.store = GcsStore(make_client("local", self.info.storage_url), self.info.bucket)
        return self.info

    def stop(self) -> None:
        self.stack.stop()

    @property
    def bucket(self) -> GcsStore:
        assert self.store is not None
        return self.store

    @property
    def warehouse(self) -> Path:
        assert self.info is not None
        return self._warehouse or Path(self.info.warehouse)

    def run(
        self,
        *,
        label: str,
        dataset: str,
        workload: Workload,
        max_batches_per_job: int | None,
        timeout: float,
        progress: Callable[[str], None],
    ) -> StackRun:
        store, bridge = self.bucket, self.stack.bridge
        assert bridge is not None
        result = StackRun(label, dataset, workload, max_batches_per_job)
        load: dict[str, Any] = {"schema": SCHEMA}
        if max_batches_per_job is not None:
            load["max_batches_per_job"] = max_batches_per_job
        store.write(f"{dataset}/_config/ORDERME", b"")
        store.write(f"{dataset}/_config/load.json", json.dumps(load).encode())
        tables = [f"{dataset}/{workload.table(t)}" for t in range(workload.tables)]
        jobs_before = set(self._job_dirs())
        drivers_before = self._launched()
        delivered_before = bridge.delivered
        started = time.monotonic()
        result.upload_seconds = workload.upload(store, dataset)

        def queued() -> bool:
            return bridge.idle() and all(
                len(store.list_objects(f"{t}/_backlog/")) >= workload.batches for t in tables
            )

        if not wait_until(queued, timeout, 0.5):
            raise RuntimeError(
                f"{label}: the batches were not all queued in {timeout:.0f} s; see {self.home}/logs"
            )
        result.queued_seconds = time.monotonic() - started
        progress(
            f"{label}: {workload.total_batches} batches uploaded out of order and queued; opening the gates"
        )
        cpu = CpuMeter()
        result.gate_opened = time.time()
        for table in tables:
            store.write(f"{table}/{GATE}", b"")
        deadline = time.monotonic() + timeout
        while not all(self.drained(t, workload.batches) for t in tables):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{label}: not settled after {timeout:.0f} s; see {self.home}/logs")
            for table in tables:
                lock = self.lock(table)
                if lock.state is LockState.FAILED:
                    raise RuntimeError(f"{label}: {table} is blocked at {lock.failed_rel}: {lock.error}")
            time.sleep(0.5)
        result.settled = time.time()
        result.cpu_seconds = cpu.seconds()
        wait_until(bridge.idle, 30, 0.2)
        result.events_delivered = bridge.delivered - delivered_before
        ids = sorted(set(self._job_dirs()) - jobs_before)
        # A table settles on its last job's done signal, a moment before that job's process ends
        # and the runner records it: wait for the records.
        wait_until(lambda: all(self._job(j).finished for j in ids), 120, 0.2)
        result.jobs = [self._job(j) for j in ids]
        result.drivers = self._launched() - drivers_before
        for table in tables:
            for info in store.list_objects(f"{table}/_turnstile/results/"):
                found = store.read(info.name)
                if found is not None:
                    result.batch_seconds.append(BatchResult.decode(found.data, info.name).seconds or 0.0)
        result.sweeper_restarts = self._sweeper_restarts(dataset, result.gate_opened)
        progress(f"{label}: settled {result.settled - result.gate_opened:.1f} s after the gates opened")
        return result

    def _sweeper_restarts(self, dataset: str, since: float) -> int:
        """Subscribers of this run's tables the sweeper had to restart (nothing else woke them)."""
        count = 0
        log = self.home / "logs" / "function-sweep.log"
        for line in log.read_text(errors="replace").splitlines() if log.is_file() else []:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                record.get("event") == "subscriber_restarted"
                and str(record.get("table", "")).startswith(f"{dataset}/")
                and datetime.fromisoformat(str(record.get("time"))).timestamp() >= since
            ):
                count += 1
        return count

    def _launched(self) -> int:
        """Spool drivers the local runner launched on this stack so far."""
        folder = self.home / DRIVERS
        return sum(1 for p in folder.glob("*/request.json")) if folder.is_dir() else 0

    def _job_dirs(self) -> list[str]:
        if self.spool:  # the jobs the bucket's spool knows: `jobs/<job>/submitted.json`
            listed = self.bucket.list_objects(driverspool.JOBS)
            return sorted({o.name.removeprefix(driverspool.JOBS).split("/", 1)[0] for o in listed})
        folder = self.home / "jobs"
        return [p.name for p in folder.iterdir()] if folder.is_dir() else []

    def _job(self, job_id: str) -> JobRecord:
        """From the job's folder: the runner's submit record and the warm driver's end record (with
        `spool`, the same two records in the bucket's spool)."""
        if self.spool:
            submitted = self.bucket.read(driverspool.submitted_name(job_id))
            started = self.bucket.read(driverspool.started_name(job_id))
            ended = self.bucket.read(driverspool.finished_name(job_id))
            at = Submitted.decode(submitted.data, job_id).submitted_at.timestamp() if submitted else 0.0
            began = JobStarted.decode(started.data, job_id).started_at.timestamp() if started else 0.0
            if ended is None:
                return JobRecord(job_id, at, 0.0, "PENDING", began)
            end = JobFinished.decode(ended.data, job_id)
            return JobRecord(job_id, at, end.finished_at.timestamp(), end.outcome.value, began)
        state = read_json(self.home / "jobs" / job_id / STATE) or {}
        finished = read_json(self.home / "jobs" / job_id / FINISHED) or {}

        def epoch(record: dict[str, Any], key: str) -> float:
            value = record.get(key)
            return datetime.fromisoformat(value).timestamp() if isinstance(value, str) else 0.0

        outcome = str(state.get("state"))
        if "exit_code" in finished:
            outcome = "SUCCEEDED" if finished["exit_code"] == 0 else "FAILED"
        return JobRecord(job_id, epoch(state, "submitted_at"), epoch(finished, "finished_at"), outcome)

    def lock(self, table: str) -> Lock:
        found = self.bucket.read(f"{table}/_bqlock")
        return Lock() if found is None else Lock.decode(found.data, table)

    def drained(self, table: str, batches: int) -> bool:
        return (
            self.lock(table).state is LockState.FREE
            and not self.bucket.list_objects(f"{table}/_backlog/", limit=1)
            and len(self.bucket.list_objects(f"{table}/_turnstile/results/")) >= batches
        )

    def startup(self, workload: Workload, repeats: int) -> list[dict[str, float]]:
        """Run a one-batch manifest (batch 0, into a new table) as a local job, `repeats` times
        one after another on the idle stack: seconds from submit to the end, and of spark-submit."""
        assert self.info is not None
        settings = settings_for(self.info)
        runner = LocalRunner.from_settings(settings)
        store = self.bucket
        runs = []
        for attempt in range(repeats):
            table = f"startup/t{attempt}"
            rel = workload.rel(0)
            uris = []
            for part in range(workload.files):
                name = f"{table}/{rel}/{workload.file_name(part)}"
                store.write(name, workload.csv(0, part))  # no _SUCCESS: the stack must not pick it up
                uris.append(f"gs://{store.bucket}/{name}")
            job_id = f"bench-startup-{attempt}-{int(time.time())}"
            manifest = Manifest(
                job_id=job_id,
                bucket=store.bucket,
                batches=(
                    ManifestBatch(
                        dataset="startup",
                        table=f"t{attempt}",
                        table_prefix=table,
                        rel=rel,
                        success_generation=1,
                        data_uris=tuple(uris),
                        load=LoadConfig.model_validate({"schema": SCHEMA}),
                        config_digest="bench",
                        result=f"{table}/_turnstile/results/{rel}/1.json",
                        failed_prefix=f"{table}/_failed/{rel}/",
                    ),
                ),
                done_signal=f"{table}/_turnstile/jobs/{job_id}.done",
                ordered=False,
            )
            store.write(f"{table}/_turnstile/jobs/{job_id}.manifest.json", manifest.encode())
            started = time.monotonic()
            with _environment(self.stack.environment(self.info.storage_url)):
                runner.submit(job_id, f"gs://{store.bucket}/{table}/_turnstile/jobs/{job_id}.manifest.json")
            if not wait_until(partial(_finished, runner, job_id), 300, 0.05):
                raise RuntimeError(f"the start-up job {job_id} did not finish; see {runner.job_dir(job_id)}")
            total = time.monotonic() - started
            status = runner.status(job_id)
            if status is None or status.state.value != "SUCCEEDED":
                raise RuntimeError(f"the start-up job {job_id} failed: {status}")
            job = self._job(job_id)
            found = store.read(f"{table}/_turnstile/results/{rel}/1.json")
            inside = (BatchResult.decode(found.data, "result").seconds or 0.0) if found else 0.0
            runs.append(
                {
                    "submit_to_done_seconds": total,
                    "job_seconds": job.seconds,
                    "batch_seconds_inside_job": inside,
                }
            )
        return runs


def _finished(runner: LocalRunner, job_id: str) -> bool:
    status = runner.status(job_id)
    return status is not None and status.state.finished


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """The stack's settings for a job the local runner starts from this process."""
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
