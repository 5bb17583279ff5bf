"""A batch's rows fitted to its table: the table evolved when load.json allows (`spark.schema`
decides how), then the rows cast and ordered as the table's columns."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as f
from pyspark.sql.types import StructType

from turnstile.config.load_config import LoadConfig
from turnstile.spark import schema


def fit(
    spark: SparkSession,
    table: str,
    frame: DataFrame,
    load: LoadConfig,
    *,
    target: StructType,
    fresh: Callable[[str], StructType],
) -> DataFrame:
    """`frame` as `table`'s columns (`target`, its schema; `fresh` reads it again after a change)."""
    keep = {load.delete_column.lower()} if load.mode == "merge" and load.delete_column else set()
    columns = [(x.name, x.dataType.simpleString()) for x in frame.schema.fields if x.name.lower() not in keep]
    evolution = schema.plan(
        [(x.name, x.dataType.simpleString()) for x in target.fields],
        columns,
        evolve=load.schema_evolution == "add_columns",
        where=table,
    )
    changes = evolution.statements(table)
    for statement in changes:
        spark.sql(statement)
    if changes:
        target = fresh(table)
    if schema.fits_exactly(frame.schema, target, keep):
        return frame
    present = {c.lower(): c for c in frame.columns}
    shaped = [
        (f.col(f"`{present[x.name.lower()]}`") if x.name.lower() in present else f.lit(None))
        .cast(x.dataType)
        .alias(x.name)
        for x in target.fields
    ]
    extra = [f.col(f"`{present[k]}`") for k in keep if k in present]
    return frame.select(*shaped, *extra)
