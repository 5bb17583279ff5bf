"""A batch written in `merge` mode: its rows, one per key, merged into the table (or its branch)."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as f

from turnstile.config.load_config import LoadConfig
from turnstile.spark import sql


def merge(spark: SparkSession, target: str, frame: DataFrame, load: LoadConfig) -> None:
    """`MERGE INTO target` of the batch's rows; of several rows with one key, the one last by
    `merge_order_by`, then by a hash of the row (the same row wins on every attempt)."""
    keys = [f.col(f"`{k}`") for k in load.merge_keys]
    order = [f.col(f"`{load.merge_order_by}`").desc_nulls_last()] if load.merge_order_by else []
    order.append(f.sha2(f.to_json(f.struct(*[f.col(f"`{c}`") for c in frame.columns])), 256).desc())
    ranked = frame.withColumn(
        "_turnstile_rank", f.row_number().over(Window.partitionBy(*keys).orderBy(*order))
    )
    ranked.filter("_turnstile_rank = 1").drop("_turnstile_rank").createOrReplaceTempView("turnstile_source")
    columns = [c for c in frame.columns if not load.delete_column or c.lower() != load.delete_column.lower()]
    spark.sql(sql.merge_into(target, "turnstile_source", load.merge_keys, columns, load.delete_column))
