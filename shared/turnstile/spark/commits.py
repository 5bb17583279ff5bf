"""Iceberg commit tagging and the table's committed-batch ledger, over the Spark session.

Every commit a batch makes carries `turnstile.*` snapshot properties. They are set through Iceberg's
thread-local commit properties (`org.apache.iceberg.spark.CommitMetadata`), which apply to any
commit made on the calling thread, so DataFrame writes, `MERGE INTO` and a transform's own DML are
tagged alike. PySpark pins each Python thread to one JVM thread, and Spark commits a V2 write on the
thread that runs the query, so the properties reach exactly the commit made inside the block. The
tests check the tag on every kind of write, so an Iceberg upgrade that changes this fails loudly.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as f

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import BatchFailed
from turnstile.state.records import ManifestBatch

BATCH_KEY = "turnstile.batch"  # "<rel>#<_SUCCESS generation>": the identity the skip rule checks


def batch_key(rel: str, success_generation: int, reprocess: str | None = None) -> str:
    """A reprocess (`turnstile reprocess`) commits under a key of its own: the batch's commit stays
    what the skip rule finds, and the reprocess is applied once per request."""
    key = f"{rel}#{success_generation}"
    return f"{key}#reprocess-{reprocess}" if reprocess else key


def batch_properties(batch: ManifestBatch, job_id: str) -> dict[str, str]:
    """The `turnstile.*` snapshot properties of the batch's commit."""
    properties = {
        BATCH_KEY: batch_key(batch.rel, batch.success_generation, batch.reprocess),
        "turnstile.table": batch.table_prefix,
        "turnstile.rel": batch.rel,
        "turnstile.success-generation": str(batch.success_generation),
        "turnstile.config.cascade-digest": batch.config_digest,
        "turnstile.job-id": job_id,
        "turnstile.position": batch.rel,  # the last applied position, on every commit
    }
    if batch.reprocess:  # a committed batch once more: the position stays where it was
        del properties["turnstile.position"]
        properties["turnstile.reprocess"] = batch.reprocess
    return properties


def jvm(spark: SparkSession) -> Any:
    """The session's JVM gateway (py4j is untyped), through which Iceberg's Java API is reached."""
    jvm = spark._jvm
    if jvm is None:
        raise BatchFailed("the Spark session has no JVM (Spark Connect?); the job needs a classic session")
    return jvm


_COMMIT_PROPERTIES: dict[int, tuple[Any, Any]] = {}  # id(SparkContext) -> (it, its ThreadLocal)


def _commit_properties_local(spark: SparkSession) -> Any:
    """Iceberg's static ThreadLocal of commit properties, looked up once per Spark context (five
    round trips; a new context may load Iceberg's classes anew)."""
    context = spark.sparkContext
    cached = _COMMIT_PROPERTIES.get(id(context))
    if cached is None or cached[0] is not context:
        gateway = jvm(spark)
        loader = gateway.java.lang.Thread.currentThread().getContextClassLoader()
        field = loader.loadClass("org.apache.iceberg.spark.CommitMetadata").getDeclaredField(
            "COMMIT_PROPERTIES"
        )
        field.setAccessible(True)
        cached = _COMMIT_PROPERTIES[id(context)] = (context, field.get(None))
    return cached[1]


@contextmanager
def commit_properties(spark: SparkSession, properties: Mapping[str, str]) -> Iterator[None]:
    local = _commit_properties_local(spark)
    values = jvm(spark).java.util.HashMap()
    for key, value in properties.items():
        values.put(key, value)
    local.set(values)
    try:
        yield
    finally:
        local.remove()


def table_exists(spark: SparkSession, table: str) -> bool:
    return bool(spark.catalog.tableExists(table))


def partitioned(spark: SparkSession, table: str) -> bool:
    """The Iceberg table has a partition spec (one call through Iceberg's Java API)."""
    loaded = jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    return not bool(loaded.spec().isUnpartitioned())


def refuse_whole_table_overwrite(spark: SparkSession, table: str, load: LoadConfig, *, exists: bool) -> None:
    """`overwrite_partitions` on a table without a partition spec would replace the whole table (the
    gcs_ocn_bq_ingest migrant's `$YYYYMMDD` truncate): BatchFailed before anything is written."""
    if load.mode != "overwrite_partitions" or (partitioned(spark, table) if exists else load.partition_by):
        return
    fix = (
        "partition it first (ALTER TABLE ... ADD PARTITION FIELD; partition_by applies to a new table only)"
        if exists
        else 'set partition_by in load.json (e.g. ["days(ts)"]): only the partitions of its rows are replaced'
    )
    raise BatchFailed(
        f"mode overwrite_partitions on {table}, which has no partition spec, would replace the whole "
        f"table: {fix}, or set mode overwrite to replace the whole table on purpose; nothing was written"
    )


def committed_batches(spark: SparkSession, table: str) -> dict[str, int]:
    """batch key -> snapshot id, over the snapshots that are current ancestors (a rolled-back
    snapshot stays in the table's metadata but does not count as applied). Read from the table's
    metadata in one call through Iceberg's Java API: a query over its `snapshots` and `history`
    tables costs a Spark job (0.2 s warm, seconds in a new application, growing with the history)."""
    if not table_exists(spark, table):
        return {}
    gateway = jvm(spark)
    loaded = gateway.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    loaded.refresh()
    text = gateway.org.apache.iceberg.TableMetadataParser.toJson(loaded.operations().current())
    return ledger(json.loads(text), BATCH_KEY)


def ledger(metadata: Mapping[str, Any], batch_property: str) -> dict[str, int]:
    """batch key -> snapshot id over the current snapshot and its ancestors in an Iceberg table
    metadata document (the parent chain ends where a snapshot was expired)."""
    snapshots = {int(x["snapshot-id"]): x for x in metadata.get("snapshots") or ()}
    found: dict[str, int] = {}
    current = metadata.get("current-snapshot-id")
    while current is not None and int(current) in snapshots:
        snapshot = snapshots[int(current)]
        key = (snapshot.get("summary") or {}).get(batch_property)
        if key is not None:
            found.setdefault(key, int(current))  # the newest commit of a key, as the skip rule finds it
        current = snapshot.get("parent-snapshot-id")
    return found


def snapshot_count(spark: SparkSession, table: str) -> int:
    """Snapshots in the table's log, read through Iceberg's Java API (no Spark job)."""
    loaded = jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    loaded.refresh()
    return int(loaded.history().size())


def load_table(spark: SparkSession, table: str) -> Any:
    """The Iceberg table through its Java API, its metadata read afresh."""
    loaded = jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    loaded.refresh()
    return loaded


def tagged_commit(
    spark: SparkSession, table: str, key: str, depth: int = 64, *, branch: str | None = None
) -> tuple[int, int] | None:
    """(snapshot id, added records) of the commit tagged `key` among the newest ancestors of the
    table's current snapshot (or of `branch`'s head), read through Iceberg's Java API: no Spark job,
    unlike a metadata-table query. The walk goes back `depth` snapshots, past commits other writers
    made meanwhile."""
    loaded = load_table(spark, table)
    snapshot = loaded.currentSnapshot() if branch is None else loaded.snapshot(branch)
    for _ in range(depth):
        if snapshot is None:
            return None
        summary = snapshot.summary()
        if summary.get(BATCH_KEY) == key:
            return int(snapshot.snapshotId()), int(summary.get("added-records") or 0)
        parent = snapshot.parentId()
        snapshot = None if parent is None else loaded.snapshot(parent)
    return None


def time_range(rows: DataFrame, load: LoadConfig) -> tuple[str | None, str | None]:
    """The batch's earliest and latest `time_column` values (the rows read, before any transform)."""
    if not load.time_column:
        return None, None
    column = f.col(f"`{load.time_column}`")
    row = rows.agg(f.min(column), f.max(column)).collect()[0]
    return (None if row[0] is None else str(row[0]), None if row[1] is None else str(row[1]))
