"""Contender (c): Spark Structured Streaming's file source with Trigger.AvailableNow into Iceberg.

What many users pick instead of an orchestrator. It cannot read `gs://` on this machine, so it gets
the same files in a local folder per table, written in the same out-of-order sequence, modification
times following arrival (the file source orders by them: it has no notion of a batch or of
`_SUCCESS`). `maxFilesPerTrigger` is the number of files per batch, so a micro-batch is one batch's
worth; each micro-batch is one Iceberg commit, and `verify` reads back which batches each one added.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from turnstile_dev.bench import verify
from turnstile_dev.bench.sparkrun import SparkRun, SparkSetup, submit
from turnstile_dev.bench.workload import SCHEMA, Workload

NAMESPACE = "streaming"


def run(setup: SparkSetup, catalog: str, workload: Workload, work: Path) -> SparkRun:
    source = workload.write_folder(work / "streaming-source")
    step = {
        "task": "streaming",
        "catalog": catalog,
        "source": str(source),
        "checkpoints": str(work / "streaming-checkpoints"),
        "tables": [workload.table(t) for t in range(workload.tables)],
        "files_per_trigger": workload.files,
    }
    return submit(setup, "streaming", [step], work / "spark")


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    catalog, tables = step["catalog"], step["tables"]
    started = time.time()
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{NAMESPACE}")
    queries = []
    for table in tables:
        name = f"{catalog}.{NAMESPACE}.{table}"
        spark.sql(f"CREATE TABLE IF NOT EXISTS {name} ({SCHEMA}) USING iceberg")
        stream = (
            spark.readStream.format("csv")
            .schema(SCHEMA)
            .option("header", "true")
            .option("maxFilesPerTrigger", step["files_per_trigger"])
            .load(str(Path(step["source"]) / table))
        )
        query = (
            stream.writeStream.format("iceberg")
            .outputMode("append")
            .trigger(availableNow=True)
            .option("checkpointLocation", str(Path(step["checkpoints"]) / table))
            .toTable(name)
        )
        queries.append(query)
    threads = [threading.Thread(target=q.awaitTermination) for q in queries]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    finished = time.time()
    found = {table: verify.snapshots(spark, f"{catalog}.{NAMESPACE}.{table}") for table in tables}
    return {
        "started": started,
        "finished": finished,
        "tables": found,
    }
