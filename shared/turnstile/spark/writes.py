"""A batch's rows written to its table (or the table's audit branch) in the table's mode: one
Iceberg commit, whose properties the caller has set."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as f

from turnstile.config.load_config import LoadConfig
from turnstile.spark import merge, windows
from turnstile.state.records import ManifestBatch


def write(spark: SparkSession, target: str, frame: DataFrame, batch: ManifestBatch, load: LoadConfig) -> None:
    if load.mode == "append":
        frame.writeTo(target).append()
    elif load.mode == "overwrite":
        frame.writeTo(target).overwrite(f.lit(True))
    elif load.mode == "overwrite_partitions":  # Iceberg dynamic partition overwrite
        frame.writeTo(target).overwritePartitions()
    elif load.mode == "replace_window":  # the step's window deleted, its rows added
        windows.replace(target, frame, batch, load)
    else:
        merge.merge(spark, target, frame, load)
