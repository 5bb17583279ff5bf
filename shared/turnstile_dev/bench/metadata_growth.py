"""metadata.json after many commits: a table created as the job creates one (turnstile's hygiene
properties), one real row appended, then its data file appended again commit after commit through
Iceberg's API, each commit tagged as the job tags its own. Measures the current metadata.json and
what the metadata folder keeps (runs inside the bench's Spark application)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from turnstile.spark.sql import HYGIENE_PROPERTIES, create_table, table_properties

NAMESPACE = "meta_growth"


def in_spark(spark: Any, step: dict[str, Any]) -> dict[str, Any]:
    catalog, commits = step["catalog"], int(step["commits"])
    table = f"{catalog}.{NAMESPACE}.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{NAMESPACE}")
    spark.sql(create_table(table, "id INT", properties=table_properties({})))
    spark.sql(f"INSERT INTO {table} VALUES (1)")
    iceberg = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    data_file = iceberg.currentSnapshot().addedDataFiles(iceberg.io()).iterator().next()
    started = time.monotonic()
    for index in range(1, commits):
        append = iceberg.newFastAppend().appendFile(data_file)
        append.set("turnstile.rel", f"2026/01/01/{index:06d}").set("turnstile.job_id", f"bench-{index}")
        append.commit()
    seconds = time.monotonic() - started
    iceberg.refresh()
    current = Path(urlparse(str(iceberg.operations().current().metadataFileLocation())).path)
    kept = sorted(current.parent.glob("*.metadata.json"))
    return {
        "commits": commits,
        "properties": dict(HYGIENE_PROPERTIES),
        "metadata_json_bytes": current.stat().st_size,
        "metadata_json_bytes_per_commit": round(current.stat().st_size / commits, 1),
        "metadata_json_files_kept": len(kept),
        "metadata_json_files_bytes": sum(p.stat().st_size for p in kept),
        "snapshots": int(iceberg.snapshots().spliterator().getExactSizeIfKnown()),
        "commit_seconds": round(seconds / max(commits - 1, 1), 4),
    }
