"""Snapshot expiry on a schedule: after a job, each table it committed to drops the snapshots its
`snapshot_retention_days` lets go, keeping at least `snapshot_retention_min` (more than the
exactly-once check looks back at). It runs only once a table holds a tenth more than it keeps, so
most jobs pay one metadata read per table and nothing else. A failed expiry is the job's log event
`snapshot_expiry_failed` (turnstile.spark.run), counted by a log-based metric that reads the
table from the message `failure_message` writes (terraform/monitoring.tf)."""

from __future__ import annotations

from datetime import datetime, timedelta

from pyspark.sql import SparkSession

from turnstile.config.load_config import LoadConfig
from turnstile.spark import commits, sql


def failure_message(table_uri: str, error: str) -> str:
    """How the log line of a failed expiry begins: the table's location, then Spark's reason."""
    return f"snapshot expiry of {table_uri} failed: {error}"


def due(snapshots: int, retain_last: int) -> bool:
    return snapshots >= retain_last + max(10, retain_last // 10)


def expire(spark: SparkSession, catalog: str, table: str, load: LoadConfig, now: datetime) -> int:
    """Expire `table`'s old snapshots when due; how many snapshots went (0: not due, or disabled)."""
    if load.snapshot_retention_days is None:
        return 0
    before = commits.snapshot_count(spark, table)
    if not due(before, load.snapshot_retention_min):
        return 0
    older_than = now - timedelta(days=load.snapshot_retention_days)
    spark.sql(sql.expire_snapshots(catalog, table, older_than, load.snapshot_retention_min)).collect()
    return before - commits.snapshot_count(spark, table)
