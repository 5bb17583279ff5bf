"""A batch's transform.sql as the job runs it: its placeholders filled with the batch's values
(`spark.placeholders`), what Spark's parser reads it as (`spark.statements`), and Spark's errors
about it, each naming the file in force."""

from __future__ import annotations

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from turnstile.core.errors import BatchFailed
from turnstile.spark import messages, placeholders, sql, statements, steps
from turnstile.state.records import ManifestBatch


def filled(batch: ManifestBatch, catalog: str, text: str) -> str:
    """transform.sql with its placeholders filled as the batch's values; BatchFailed naming the
    file when it cannot be."""
    try:
        return sql.transform(text, values(batch, catalog))
    except BatchFailed as exc:
        if batch.transform_source is None:
            raise
        # "transform.sql must hold one statement..." names the very object at fault.
        raise BatchFailed(str(exc).replace("transform.sql", batch.transform_source, 1)) from exc


def values(batch: ManifestBatch, catalog: str) -> dict[str, placeholders.Value]:
    """What each `${...}` placeholder of the batch's SQL (transform.sql, expectations) stands for."""
    return {
        "table": placeholders.name(catalog, batch.dataset, batch.table),
        "catalog": placeholders.name(catalog),
        "dataset": placeholders.name(batch.dataset),
        "table_name": placeholders.name(batch.table),
        "rel": placeholders.string(batch.rel),
        "generation": placeholders.number(batch.success_generation),
    } | steps.window_placeholders(batch)


def parsed(spark: SparkSession, batch: ManifestBatch, statement: str) -> statements.Statement:
    """What a batch's transform.sql is, by Spark's parser: a query or one DML; BatchFailed naming
    the file when it does not parse or is another statement (CREATE, DROP, CALL...)."""
    try:
        found = statements.parse(spark, statement)
    except AnalysisException as exc:  # ParseException is one
        raise failed(batch, exc) from exc
    if not (found.query or found.dml):
        raise BatchFailed(
            f"{_source(batch)} is {found.described()}; a transform.sql is one SELECT over the view "
            "`batch`, whose rows are written in the table's mode, or one MERGE/UPDATE/DELETE/INSERT "
            "that writes the table itself: rewrite it as one of these, then apply the batch again "
            "(turnstile status shows the command)"
        )
    return found


def run(spark: SparkSession, batch: ManifestBatch, statement: str) -> DataFrame:
    """Run transform.sql; a statement Spark cannot parse or resolve is reported with its file."""
    try:
        return spark.sql(statement)
    except AnalysisException as exc:  # ParseException is one too: the statement's fault, not the data's
        raise failed(batch, exc) from exc


def failed(batch: ManifestBatch, exc: AnalysisException) -> BatchFailed:
    return BatchFailed(
        f"{_source(batch)} fails on batch {batch.rel!r}: {messages.reason(exc)}; fix the statement in "
        "that file (it reads the view `batch`), then apply the batch again (turnstile status shows "
        "the command)"
    )


def _source(batch: ManifestBatch) -> str:
    return batch.transform_source or "transform.sql"
