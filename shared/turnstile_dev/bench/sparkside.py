"""The Spark side of the benchmark: `spark-submit sparkside.py NAME ARGS.json RESULT.json`.

ARGS.json holds a list of steps, each `{"task": ..., ...}`, run in order in one Spark session; the
result file gets their results in the same order, plus when the session was ready. Tasks:
`streaming` (contender c), `floor` (contender d), `job_cost` (the job against a bare read-and-append),
`metadata_growth` (metadata.json after many commits), `quality_cost` (the job with expectations
and audits against without, and the audit branch's snapshots), `rebuild_cost` (a derived step's
rebuild against its first build) and `verify` (read back what a contender committed).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from turnstile_dev.bench import (
    floor,
    job_cost,
    metadata_growth,
    quality_cost,
    rebuild_cost,
    streaming,
    verify,
)


def main(argv: list[str]) -> int:
    _, request, result = argv
    steps: list[dict[str, Any]] = json.loads(Path(request).read_text())
    started = time.time()
    spark = SparkSession.builder.appName("turnstile-bench").getOrCreate()
    session_ready = time.time()
    outputs: list[dict[str, Any]] = []
    try:
        for step in steps:
            outputs.append(run_step(spark, step))
    finally:
        spark.stop()
    Path(result).write_text(
        json.dumps({"steps": outputs, "python_started": started, "session_ready": session_ready})
    )
    return 0


def run_step(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    task = step["task"]
    if task == "streaming":
        return streaming.in_spark(spark, step)
    if task == "floor":
        return floor.in_spark(spark, step)
    if task == "job_cost":
        return job_cost.in_spark(spark, step)
    if task == "quality_cost":
        return quality_cost.in_spark(spark, step)
    if task == "rebuild_cost":
        return rebuild_cost.in_spark(spark, step)
    if task == "metadata_growth":
        return metadata_growth.in_spark(spark, step)
    if task == "verify":
        return {"tables": {table: verify.snapshots(spark, table) for table in step["tables"]}}
    raise ValueError(f"unknown bench task {task!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
