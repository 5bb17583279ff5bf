"""Reads one batch's files into a DataFrame, setting aside rows that do not parse."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as f
from pyspark.sql.types import StringType, StructField, StructType

from turnstile.load_config import LoadConfig

CORRUPT = "_turnstile_unparsed"
_SPARK_FORMAT = {
    "csv": "csv",
    "json": "json",
    "jsonl": "json",
    "parquet": "parquet",
    "orc": "orc",
    "text": "text",
}


@dataclass
class ReadBatch:
    rows: DataFrame  # the rows that parsed
    bad: DataFrame | None  # one column, the raw text of each row that did not
    rows_read: int
    bad_rows: int
    cached: DataFrame | None = None  # the cached read that `rows` and `bad` derive from

    def release(self) -> None:
        """Drop the cached read. Spark finds a cache by plan, and a plan over the same paths is
        the same plan: a batch re-uploaded under the same file names would read the stale cache."""
        if self.cached is not None:
            self.cached.unpersist()


def _options(load: LoadConfig) -> dict[str, str]:
    options: dict[str, str] = {}
    if load.format == "csv":
        options |= {"header": "true", "inferSchema": "true"}
    options |= {
        key: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in load.reader_options.items()
    }
    return options


def read(spark: SparkSession, paths: list[str], load: LoadConfig) -> ReadBatch:
    reader = spark.read.format(_SPARK_FORMAT[load.format]).options(**_options(load))
    if not paths:
        raise ValueError("a batch with no data files")
    textual = load.format in ("csv", "json", "jsonl")
    if load.schema_ is not None:
        schema = spark.createDataFrame([], load.schema_).schema  # Spark parses the DDL
        if textual:  # rows that do not fit the schema land in CORRUPT instead of failing the read
            schema = StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        reader = reader.schema(schema)
    frame = reader.load(paths)
    if CORRUPT not in frame.columns:
        frame = frame.cache()
        count = frame.count()
        return ReadBatch(frame, None, count, 0, frame)
    frame = frame.cache()  # Spark refuses queries on the corrupt-record column of an uncached read
    bad = frame.filter(f.col(CORRUPT).isNotNull()).select(CORRUPT)
    rows = frame.filter(f.col(CORRUPT).isNull()).drop(CORRUPT)
    # Both counts in one pass (it also fills the cache the write then reads from).
    counted = frame.agg(f.count(f.lit(1)).alias("total"), f.count(f.col(CORRUPT)).alias("bad")).collect()[0]
    total, bad_rows = int(counted["total"]), int(counted["bad"])
    return ReadBatch(rows, bad if bad_rows else None, total, bad_rows, frame)
