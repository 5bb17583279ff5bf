"""`turnstile query`: Spark SQL on the local stack's Iceberg warehouse.

pyspark is imported inside `run` only: every other command starts without it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnstile.jobs.local_spark import check_java, ensure_jars, spark_conf
from turnstile.local.stackinfo import StackInfo
from turnstile.ops.errors import Failed, Refused


@dataclass(frozen=True)
class Rows:
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    truncated: bool  # more rows than the limit


def locate(stack: StackInfo | None, home: Path) -> tuple[StackInfo, Path]:
    """The local stack and its warehouse folder, or `Refused` saying how to get them."""
    if stack is None:
        raise Refused(
            f"no local stack at {home / 'stack.json'}; start one with `turnstile up` (or set "
            "TURNSTILE_HOME to the folder of a running stack)"
        )
    warehouse = Path(stack.warehouse)
    if not warehouse.is_dir():
        raise Refused(
            f"the local warehouse {warehouse} does not exist yet; no batch has been applied: "
            "upload one (turnstile put) and wait for it"
        )
    return stack, warehouse


def run(stack: StackInfo, warehouse: Path, sql: str, limit: int) -> Rows:
    """Run one statement in a local session with the stack's catalog; at most `limit` rows back."""
    check_java()
    conf = spark_conf(ensure_jars(Path(stack.home) / "jars"), warehouse, stack.catalog)
    from pyspark.errors import PySparkException  # noqa: PLC0415  (keep pyspark out of the other commands)
    from pyspark.sql import SparkSession  # noqa: PLC0415

    builder = SparkSession.builder.appName("turnstile-query")
    for key, value in conf.items():
        builder = builder.config(key, value)
    builder = builder.config("spark.sql.defaultCatalog", stack.catalog)
    spark = builder.getOrCreate()
    try:
        frame = spark.sql(sql)
        columns = tuple(frame.columns)
        fetched = frame.limit(limit + 1).collect() if columns else []
    except PySparkException as exc:
        raise Failed(
            f"Spark rejected the query: {_first_line(str(exc))}; tables are named "
            f"{stack.catalog}.<dataset>.<table> (try: SHOW TABLES IN {stack.catalog}.<dataset>)"
        ) from exc
    except Exception as exc:  # py4j errors from the JVM carry no common base with pyspark's
        raise Failed(f"Spark failed: {_first_line(str(exc))}; see the Spark output above") from exc
    finally:
        spark.stop()
    rows = tuple(tuple(row) for row in fetched[:limit])
    return Rows(columns, rows, truncated=len(fetched) > limit)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:500].rstrip(".") if lines else "no message"
