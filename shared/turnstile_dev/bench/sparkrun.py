"""Runs a benchmark task in its own Spark application, the way the local job runner runs a job.

`spark-submit [--conf ...] turnstile_dev/bench/sparkside.py TASK ARGS.json RESULT.json`, with the same
Spark properties as every local turnstile job (`jobs.local_spark.spark_conf`: local[2], the Iceberg
runtime, a Hadoop catalog). The wall time counts from the moment spark-submit is started, JVM
start-up included, as a turnstile job's does.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnstile.jobs.local_spark import ensure_jars, spark_conf
from turnstile.jobs.local_worker import spark_submit


@dataclass(frozen=True)
class SparkSetup:
    jars: list[Path]
    catalogs: dict[str, Path]  # catalog name -> warehouse

    @staticmethod
    def build(jars_dir: Path, catalogs: dict[str, Path]) -> SparkSetup:
        return SparkSetup(ensure_jars(jars_dir), catalogs)

    def conf(self) -> dict[str, str]:
        merged: dict[str, str] = {}
        for name, warehouse in self.catalogs.items():
            merged |= spark_conf(self.jars, warehouse, name)
        return merged


@dataclass(frozen=True)
class SparkRun:
    result: dict[str, Any]  # {"steps": [one result per step], "python_started", "session_ready"}
    launched_at: float  # epoch seconds when spark-submit started
    wall_seconds: float  # until it exited


def submit(setup: SparkSetup, name: str, steps: list[dict[str, Any]], folder: Path) -> SparkRun:
    """Run `steps` (sparkside tasks) in a new Spark application; their JSON results, or an error."""
    folder.mkdir(parents=True, exist_ok=True)
    request, result, log = (
        folder / f"{name}.args.json",
        folder / f"{name}.result.json",
        folder / f"{name}.log",
    )
    request.write_text(json.dumps(steps))
    result.unlink(missing_ok=True)
    command = [str(spark_submit())]
    for key, value in setup.conf().items():
        command += ["--conf", f"{key}={value}"]
    command += [str(Path(__file__).with_name("sparkside.py")), name, str(request), str(result)]
    launched, started = time.time(), time.monotonic()
    with log.open("wb") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    wall = time.monotonic() - started
    if code != 0 or not result.is_file():
        tail = log.read_text(errors="replace").splitlines()[-15:]
        raise RuntimeError(f"bench run {name} failed (exit {code}); {log}:\n" + "\n".join(tail))
    loaded: dict[str, Any] = json.loads(result.read_text())
    return SparkRun(loaded, launched, wall)
