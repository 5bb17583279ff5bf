"""Contender (d), the floor: one Spark session reads every batch and appends it, in rel order.

No orchestration, no bookkeeping: per batch one read of its files and one Iceberg append (one
commit, the same granularity as turnstile's). The tables run side by side, one thread each, as
turnstile runs one job per table at a time.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from turnstile_dev.bench import verify
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup, submit
from turnstile_dev.bench.workload import SCHEMA, Workload

NAMESPACE = "floor"


def run(setup: SparkSetup, catalog: str, workload: Workload, work: Path) -> SparkRun:
    batches = workload.write_batches(work / "floor-source")  # the same bytes for every table
    step = {
        "task": "floor",
        "catalog": catalog,
        "tables": [workload.table(t) for t in range(workload.tables)],
        "batches": batches,
    }
    return submit(setup, "floor", [step], work / "spark")


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    catalog, tables, batches = step["catalog"], step["tables"], step["batches"]
    started = time.time()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{NAMESPACE}")
    errors: list[BaseException] = []

    def load(table: str) -> None:
        name = f"{catalog}.{NAMESPACE}.{table}"
        try:
            spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({SCHEMA}) USING iceberg")
            for paths in batches:
                spark.read.schema(SCHEMA).option("header", "true").csv(paths).writeTo(name).append()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(t,)) for t in tables]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    finished = time.time()
    found = {t: verify.snapshots(spark, f"{catalog}.{NAMESPACE}.{t}") for t in tables}
    return {"started": started, "finished": finished, "tables": found}
