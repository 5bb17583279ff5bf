"""The warm local driver: one Spark application that runs local jobs one after another.

    spark-submit [--conf ...] warm.py SPOOL IDLE_SECONDS

`turnstile.jobs.local.LocalRunner` starts it on first use and queues one request per job in
SPOOL (`turnstile.spool`). A job costs what its batches cost: the JVM, pyspark, the session and
the Iceberg catalog are paid once per driver, not ≈ 9 s per job. Each job runs on this process's
main thread (Iceberg's commit metadata is thread-local), its Python output appended to the job's
log. The driver exits after IDLE_SECONDS without a request, or when its Spark context died.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from turnstile.spark.dependencies import SHIPPED_DIR, use_shipped
from turnstile.spool import WORKER, locked, queued, read_json, take, write_json

POLL_SECONDS = 0.05

RunJob = Callable[[SparkSession, str, Path | None], int]


@contextmanager
def output_to(log: Path) -> Iterator[None]:
    """This process's stdout and stderr appended to `log` (file descriptors, so print, logging
    and tracebacks all land there)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("ab") as target:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


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


def serve(spark: SparkSession, spool: Path, idle_seconds: float, run_job: RunJob) -> int:
    me = os.getpgrp()  # the spark-submit process the runner started and recorded
    count = 0
    idle_since = time.monotonic()
    while True:
        claimed = take(spool)
        if claimed is None:
            if time.monotonic() - idle_since > idle_seconds and _leave_if_idle(spool, me):
                return 0
            time.sleep(POLL_SECONDS)
            continue
        path, request = claimed
        if request.get("worker") == me:  # else queued to a driver that died: already FAILED
            count += 1
            run_one(spark, request, run_job, me, count)
        path.unlink(missing_ok=True)
        idle_since = time.monotonic()
        if spark.sparkContext._jsc is None or spark.sparkContext._jsc.sc().isStopped():
            print("the Spark context stopped; the next job starts a new driver", file=sys.stderr)
            return 1


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


def _run_job(spark: SparkSession, manifest: str, stage_to: Path | None) -> int:
    """Run one manifest with the stores of its cloud (imported only now: after the dependencies)."""
    from turnstile.spark.run import run  # noqa: PLC0415

    if manifest.startswith("s3://"):
        from turnstile.spark.main_aws import s3_stores  # noqa: PLC0415

        return run(spark, manifest, stage_to, s3_stores())
    from turnstile.spark.main import gcs_stores  # noqa: PLC0415

    return run(spark, manifest, stage_to, gcs_stores())


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
