"""The warm local driver: one Spark application that runs local jobs one after another.

    spark-submit [--conf ...] warm.py SPOOL IDLE_SECONDS

`turnstile.jobs.local.LocalRunner` starts it on first use and queues one request per job in
SPOOL (`turnstile.state.spool`). A job costs what its batches cost: the JVM, pyspark, the session and
the Iceberg catalog are paid once per driver, not ≈ 9 s per job. Up to SLOTS jobs run at once,
each on a thread of its own (Iceberg's commit metadata is thread-local, so each commit is tagged by
its own job; one table never has two ordered jobs at once: its lock sees to that), so tables apply
side by side as they would on separate clusters. A job's Python output (its outcomes, errors and
tracebacks) is appended to the job's log; the JVM's own output goes to the driver's log. The driver
exits after IDLE_SECONDS without a request, when its Spark context died, when its JVM died (this
process is then orphaned: it must not take the requests queued to the driver that replaces it),
and when it finds a request queued to another live driver.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from turnstile.spark.dependencies import SHIPPED_DIR, use_shipped
from turnstile.state.spool import WORKER, alive, locked, put_back, queued, read_json, take, write_json

POLL_SECONDS = 0.05
SLOTS = 2  # jobs at once: local Spark has two cores (`jobs.local_spark.CORES`)

RunJob = Callable[[SparkSession, str, Path | None], int]


class _Routed(io.TextIOBase):
    """sys.stdout or sys.stderr, written to the log of the job running on the calling thread."""

    def __init__(self, default: TextIO) -> None:
        self._default = default
        self._local = threading.local()

    def target(self, log: TextIO | None) -> None:
        self._local.target = log

    def write(self, text: str) -> int:
        target: TextIO = getattr(self._local, "target", None) or self._default
        return target.write(text)

    def flush(self) -> None:
        target: TextIO = getattr(self._local, "target", None) or self._default
        target.flush()


def _routers() -> tuple[_Routed, _Routed]:
    """This process's stdout and stderr, routed per thread (installed once)."""
    if not isinstance(sys.stdout, _Routed):
        sys.stdout = _Routed(sys.stdout)
    if not isinstance(sys.stderr, _Routed):
        sys.stderr = _Routed(sys.stderr)
    return sys.stdout, sys.stderr


@contextmanager
def output_to(log: Path) -> Iterator[None]:
    """The calling thread's print, logging and tracebacks appended to `log`."""
    routers = _routers()
    with log.open("a", encoding="utf-8") as target:
        for router in routers:
            router.target(target)
        try:
            yield
        finally:
            for router in routers:
                router.flush()
                router.target(None)


def run_one(spark: SparkSession, request: dict[str, Any], run_job: RunJob, me: int, count: int) -> int:
    write_json(Path(request["started"]), {"pid": me, "started_at": _now()})
    stage_to = Path(request["stage_to"]) if request.get("stage_to") else None
    with output_to(Path(request["log"])):
        print(f"turnstile local driver pid {me}: job {count} of this driver", flush=True)
        try:
            code = run_job(spark, request["manifest"], stage_to)
        except Exception as exc:  # the job's failure, recorded; the driver goes on
            traceback.print_exc()
            print(f"turnstile job failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            code = 1
    write_json(Path(request["finished"]), {"exit_code": code, "finished_at": _now()})
    return code


def serve(spark: SparkSession, spool: Path, idle_seconds: float, run_job: RunJob, slots: int = SLOTS) -> int:
    me = os.getpgrp()  # the spark-submit process the runner started and recorded
    jvm = os.getppid()  # spark-submit's JVM started this process
    count = 0
    idle_since = time.monotonic()
    running: set[Future[int]] = set()
    with ThreadPoolExecutor(slots, thread_name_prefix="turnstile-job") as pool:
        while True:
            ended = {job for job in running if job.done()}
            running -= ended
            if ended and _stopped(spark):
                print("the Spark context stopped; the next job starts a new driver", file=sys.stderr)
                return 1
            if running:
                idle_since = time.monotonic()
            if os.getppid() != jvm:  # orphaned (the JVM was killed): the runner starts a new driver
                print("the driver's JVM is gone; the next job starts a new driver", file=sys.stderr)
                return 1
            claimed = take(spool) if len(running) < slots else None
            if claimed is None:
                if not running and time.monotonic() - idle_since > idle_seconds and _leave_if_idle(spool, me):
                    return 0
                time.sleep(POLL_SECONDS)
                continue
            path, request = claimed
            worker = request.get("worker")
            if worker != me and isinstance(worker, int) and alive(worker):
                put_back(spool, path)  # the spool's new driver's: this one was replaced, it leaves
                return 1
            if worker != me:  # queued to a driver that died: already FAILED
                path.unlink(missing_ok=True)
                continue
            count += 1
            running.add(pool.submit(_run_claimed, spark, claimed, run_job, me, count))


def _run_claimed(
    spark: SparkSession, claimed: tuple[Path, dict[str, Any]], run_job: RunJob, me: int, count: int
) -> int:
    path, request = claimed
    try:
        # A session of its own: temp views (the view `batch`) and SQL settings are per session,
        # while the Spark context, its JVM and the catalog's configuration are shared.
        return run_one(spark.newSession(), request, run_job, me, count)
    finally:
        path.unlink(missing_ok=True)


def _stopped(spark: SparkSession) -> bool:
    context = spark.sparkContext._jsc
    return context is None or bool(context.sc().isStopped())


def _leave_if_idle(spool: Path, me: int) -> bool:
    with locked(spool):
        if queued(spool):
            return False
        worker = read_json(spool / WORKER)
        if worker is not None and worker.get("pid") == me:
            (spool / WORKER).unlink()
        return True


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _run_job(
    spark: SparkSession,
    manifest: str,
    stage_to: Path | None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> int:
    """Run one manifest with the stores of its cloud (imported only now: after the dependencies)."""
    from turnstile.spark.run import run  # noqa: PLC0415

    if manifest.startswith("s3://"):
        from turnstile.spark.main_aws import s3_stores  # noqa: PLC0415

        return run(spark, manifest, stage_to, s3_stores(), stop_requested)
    from turnstile.spark.main import gcs_stores  # noqa: PLC0415

    return run(spark, manifest, stage_to, gcs_stores(), stop_requested)


def main(argv: list[str]) -> int:
    spool, idle_seconds = Path(argv[0]), float(argv[1])
    spark = SparkSession.builder.appName("turnstile-local-driver").getOrCreate()
    try:
        use_shipped([Path.cwd() / SHIPPED_DIR, Path(SparkFiles.getRootDirectory()) / SHIPPED_DIR])
        return serve(spark, spool, idle_seconds, _run_job)
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
