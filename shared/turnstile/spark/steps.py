"""A derived table's step: its transform.sql, run over the committed source tables for the step's
window, gives the rows the step writes.

A step is a manifest batch with no data files and a window `[window_start, window_end)` (UTC). Its
transform.sql is a SELECT that reads the source tables (`${catalog}.staging.orders`) and filters
them with `${window_start}` / `${window_end}`, substituted as zoned TIMESTAMP literals so the
session's time zone does not shift them. The rows it returns are written like a batch's rows, in
the table's mode, as one commit tagged with the step's identity; the applier does that part.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import SparkSession

from turnstile.core.errors import BatchFailed
from turnstile.spark import messages, placeholders, statements
from turnstile.spark.reading import ReadBatch
from turnstile.state.records import ManifestBatch

WINDOW_PLACEHOLDERS = ("window_start", "window_end")
"""The `${...}` a derived table's transform.sql may use besides sql.TRANSFORM_PLACEHOLDERS."""


def is_step(batch: ManifestBatch) -> bool:
    return batch.window_start is not None and batch.window_end is not None


def window_placeholders(batch: ManifestBatch) -> dict[str, placeholders.Value]:
    """`${window_start}` and `${window_end}` of a step (TIMESTAMP literals); none for a batch of files."""
    if batch.window_start is None or batch.window_end is None:
        return {}
    return {
        "window_start": placeholders.timestamp(batch.window_start),
        "window_end": placeholders.timestamp(batch.window_end),
    }


def describe(batch: ManifestBatch) -> str:
    """`step '2026/01/01/05' [2026-01-01T05:00:00Z, 2026-01-01T06:00:00Z)`, for errors."""
    start, end = (x.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for x in _window(batch))
    return f"step {batch.rel!r} [{start}, {end})"


def transform_text(batch: ManifestBatch, config_uri: str) -> str:
    """The step's transform.sql; BatchFailed saying where to put one when the table has none."""
    if not batch.transform_sql:
        raise BatchFailed(
            f"derived table {batch.table_prefix} has no transform.sql, so {describe(batch)} has nothing "
            f"to run: upload {config_uri}transform.sql, a SELECT over the source tables for the rows "
            "between ${window_start} and ${window_end}, then apply the step again (turnstile status "
            "shows the command)"
        )
    return batch.transform_sql


def read(spark: SparkSession, batch: ManifestBatch, statement: str) -> ReadBatch:
    """The step's rows: `statement` (transform.sql with its placeholders filled) run and cached,
    counted once. BatchFailed when Spark's parser reads it as anything but a query; Spark's own
    errors are raised as they are (the applier reports them through `transform_failed`)."""
    kind = statements.parse(spark, statement)
    if not kind.query:
        raise BatchFailed(
            f"{_source(batch)} of derived table {batch.table_prefix} is {kind.described()}, not a "
            "SELECT; a derived table's transform.sql is a SELECT of the step's rows, written in the "
            "table's mode (append, merge with merge_keys, overwrite_partitions): rewrite it as that SELECT"
        )
    rows = spark.sql(statement).cache()
    return ReadBatch(rows, None, rows.count(), 0, rows)


def transform_failed(batch: ManifestBatch, exc: BaseException) -> BatchFailed:
    """The error of a transform.sql Spark could not parse, resolve or run for this step."""
    reason = messages.reason(exc)
    return BatchFailed(
        f"{_source(batch)} fails on {describe(batch)}: {reason}; fix the statement in that file (it "
        "reads the committed source tables for ${window_start} <= time < ${window_end}), then apply "
        "the step again (turnstile status shows the command)"
    )


def as_rows(batch: ManifestBatch) -> ManifestBatch:
    """The step as the applier writes it: its rows are already the transform's, so none runs again."""
    return batch.model_copy(update={"transform_sql": None})


def _source(batch: ManifestBatch) -> str:
    return batch.transform_source or "transform.sql"


def _window(batch: ManifestBatch) -> tuple[datetime, datetime]:
    if batch.window_start is None or batch.window_end is None:
        raise BatchFailed(f"batch {batch.rel!r} is not a derived table's step (it has no window)")
    return batch.window_start, batch.window_end
