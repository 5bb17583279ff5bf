"""load.json's `expectations` run over a batch's rows before its write (`turnstile.config.expectations`).

A row passes an expectation only when its check is TRUE (NULL fails, as in Delta Live Tables). Every
check is resolved against the rows first (no job: Spark's analysis), so a check that does not parse,
names a column the batch lacks or is not boolean fails the batch naming `expectations[i].check`.
Then one pass over the rows counts the rows failing each expectation, before the write: with a `drop`
expectation it is the query that collects the rows to set aside (usually none), the counts observed
on its way (`DataFrame.observe`: one Spark job, no shuffle); without, one aggregation. The rows a
`drop` sets aside go to `_failed/expectations-<generation>.jsonl` (with the expectation's name and the
object they came from) before the commit, so a job that dies after its commit never leaves dropped
rows unrecorded: the retry skips the committed batch. Only when a `fail` failed does a further query
run, for its first offending row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as f

from turnstile.config.expectations import Expectation
from turnstile.core import logs
from turnstile.core.errors import BatchFailed, ExpectationFailed
from turnstile.spark import messages, placeholders
from turnstile.spark.reading import SOURCE
from turnstile.spark.sql import quote
from turnstile.spark.staging import as_uploaded
from turnstile.state.records import ExpectationCount, ManifestBatch
from turnstile.store.port import ObjectStore, object_uri

log = logs.get("job")
EVENT = "expectation_rows_failed"
"""The log event of an expectation that rows of a batch failed (a log-based metric in terraform/)."""


@dataclass(frozen=True)
class Checked:
    rows: DataFrame  # the rows to write: those of every `drop` expectation's failures left out
    counts: tuple[ExpectationCount, ...]  # per expectation, in load.json's order
    rows_read: int  # the rows checked
    dropped: int  # rows left out (set aside in `_failed/`)


@dataclass(frozen=True)
class Where:
    """Where the batch's rows come from, to name a row's object as uploaded."""

    store: ObjectStore  # the data bucket's, where `_failed/` is
    uris: Sequence[str]  # the batch's data files as uploaded
    paths: Sequence[str]  # where Spark read them


def filled(batch: ManifestBatch, values: dict[str, placeholders.Value]) -> list[str]:
    """Each expectation's check with its `${...}` placeholders filled as SQL values (`values`, as
    transform.sql's); BatchFailed naming `expectations[i].check` when one cannot be."""
    found = []
    for index, expectation in enumerate(batch.load.expectations):
        try:
            found.append(placeholders.fill(expectation.check, values))
        except placeholders.Unfilled as exc:
            raise BatchFailed(f"load.json's expectations[{index}].check {exc}") from exc
    return found


def check(batch: ManifestBatch, rows: DataFrame, checks: list[str], where: Where) -> Checked:
    """The batch's rows checked against its expectations; ExpectationFailed when rows fail one whose
    on_fail is `fail`, BatchFailed when a check cannot run on these rows."""
    data = [c for c in rows.columns if c != SOURCE]
    expectations = batch.load.expectations
    if not expectations:
        return Checked(rows.select(*[f.col(quote(c)) for c in data]), (), 0, 0)
    passes = [_passing(batch, rows, index, text) for index, text in enumerate(checks)]
    measures = [
        f.count(f.lit(1)).alias("rows"),
        *[f.count(f.when(~passed, 1)).alias(f"e{i}") for i, passed in enumerate(passes)],
    ]
    drops = [(e, passes[i]) for i, e in enumerate(expectations) if e.on_fail == "drop"]
    if drops:
        found, set_aside = _dropped(rows, measures, drops, data)
    else:
        found, set_aside = rows.agg(*measures).collect()[0], []
    counts = tuple(
        ExpectationCount(name=e.name, on_fail=e.on_fail, failed_rows=int(found[f"e{i}"]))
        for i, e in enumerate(expectations)
    )
    for count in counts:
        if count.failed_rows:
            _log(batch, where.store, count)
    for index, (expectation, count) in enumerate(zip(expectations, counts, strict=True)):
        if expectation.on_fail == "fail" and count.failed_rows:
            first = rows.where(~passes[index]).limit(1)
            raise ExpectationFailed(
                _failure(batch, index, count.failed_rows, _shown(first, data, where)),
                counts=tuple((c.name, c.on_fail, c.failed_rows) for c in counts),
                rows_read=int(found["rows"]),
            )
    kept = rows
    dropped = 0
    if set_aside:
        dropped = _set_aside(batch, set_aside, [e for e, _ in drops], where)
        kept = rows.where(_all([p for _, p in drops]))
    return Checked(kept.select(*[f.col(quote(c)) for c in data]), counts, int(found["rows"]), dropped)


_OBSERVED = "turnstile_expectations"


def _dropped(
    rows: DataFrame, measures: list[Column], drops: list[tuple[Expectation, Column]], data: list[str]
) -> tuple[Any, list[Row]]:
    """One pass: the rows failing a `drop` expectation (as JSON, their object, which drops they
    fail), with every expectation's count observed over all the rows on the way (`measures`)."""
    source = f.col(SOURCE) if SOURCE in rows.columns else f.lit(None).cast("string")
    observed = rows.observe(_OBSERVED, *measures)
    frame = observed.where(~_all([p for _, p in drops])).select(
        _json(data).alias("row"),
        source.alias("file"),
        *[(~passed).alias(f"d{i}") for i, (_, passed) in enumerate(drops)],
    )
    collected = frame.collect()
    # Filled by the query just run, on the DataFrame's own execution (no listener to wait for).
    metrics = frame._jdf.queryExecution().observedMetrics().get(_OBSERVED)
    if not metrics.isDefined():  # not expected: counted apart rather than guessed
        return rows.agg(*measures).collect()[0], collected
    found = metrics.get()
    names = ["rows", *[f"e{i}" for i in range(len(measures) - 1)]]
    return {name: int(found.getLong(i)) for i, name in enumerate(names)}, collected


def _passing(batch: ManifestBatch, rows: DataFrame, index: int, text: str) -> Column:
    """`coalesce(check, false)`: true for the rows that pass. Resolved against `rows` first (no job
    runs), as a filter: a check that does not parse, names an unknown column, is not boolean or
    aggregates fails the batch here, naming it."""
    expectation = batch.load.expectations[index]
    try:
        rows.where(f.expr(text))
    except AnalysisException as exc:  # ParseException is one
        raise BatchFailed(
            f"load.json's expectations[{index}].check ({expectation.name!r}: {expectation.check}) cannot "
            f"run on batch {batch.rel!r}: {messages.reason(exc)}; fix the check (a boolean SQL "
            f"expression over the batch's columns: {', '.join(c for c in rows.columns if c != SOURCE)})"
        ) from exc
    return f.coalesce(f.expr(text), f.lit(False))


def _json(data: list[str]) -> Column:
    """The row as a JSON object, its null columns included (a null is often why it failed)."""
    return f.to_json(f.struct(*[f.col(quote(c)) for c in data]), {"ignoreNullFields": "false"})


def _all(columns: list[Column]) -> Column:
    found = columns[0]
    for column in columns[1:]:
        found = found & column
    return found


def _shown(first: DataFrame, data: list[str], where: Where) -> tuple[str, str | None]:
    """The first row of `first` as JSON, and the object it came from (None when unknown)."""
    source = f.col(SOURCE) if SOURCE in first.columns else f.lit(None).cast("string")
    row = first.select(_json(data).alias("row"), source.alias("file"))
    found = row.collect()
    if not found:
        return "(none)", None
    return str(found[0]["row"]), _uploaded(found[0]["file"], where)


def _uploaded(file: str | None, where: Where) -> str | None:
    if not file:
        return None
    return as_uploaded(file, where.uris, where.paths)


def _failure(batch: ManifestBatch, index: int, count: int, first: tuple[str, str | None]) -> str:
    expectation = batch.load.expectations[index]
    row, file = first
    source = f" in {file}" if file else ""
    return (
        f"expectation {expectation.name!r} (expectations[{index}].check: {expectation.check}) failed on "
        f"{count} row(s) of batch {batch.rel!r}, and its on_fail is 'fail'; the first: {row}{source}. "
        "Nothing was committed: fix the data and upload the batch again, or change the expectation in "
        "load.json (on_fail 'drop' sets such rows aside, 'warn' loads them), then apply the batch again "
        "(turnstile status shows the command)"
    )


def _set_aside(batch: ManifestBatch, rows: list[Row], drops: list[Expectation], where: Where) -> int:
    """Write the rows failing a `drop` expectation (`_dropped`'s) to the batch's `_failed/` file:
    per row, the first expectation it failed, all of them, the row and its object."""
    lines = []
    for found in rows:
        names = [e.name for i, e in enumerate(drops) if found[f"d{i}"]]
        line: dict[str, object] = {
            "expectation": names[0],
            "expectations": names,
            "row": json.loads(found["row"]),
        }
        if (file := _uploaded(found["file"], where)) is not None:
            line["file"] = file
        lines.append(json.dumps(line) + "\n")
    name = f"{batch.failed_prefix}expectations-{batch.success_generation}.jsonl"
    where.store.write(name, "".join(lines).encode())
    print(f"{len(lines)} row(s) of {batch.rel} dropped by expectations: {object_uri(where.store, name)}")
    return len(lines)


def _log(batch: ManifestBatch, store: ObjectStore, count: ExpectationCount) -> None:
    """One line per expectation rows of the batch failed; its message begins the same whether Cloud
    Logging parses the line into fields or keeps it as text (the metric reads either)."""
    log.warning(
        message(object_uri(store, batch.table_prefix), count, batch.rel),
        extra={
            "event": EVENT,
            "table": batch.table_prefix,
            "bucket": store.bucket,
            "rel": batch.rel,
            "expectation": count.name,
            "on_fail": count.on_fail,
            "failed_rows": count.failed_rows,
        },
    )


def message(table: str, count: ExpectationCount, rel: str) -> str:
    """`expectation_rows_failed: expectation NAME of gs://BUCKET/TABLE: N row(s) failed, on_fail
    ACTION (batch REL)`: terraform/monitoring.tf reads the table, the name and the action from it."""
    return (
        f"{EVENT}: expectation {count.name} of {table}: {count.failed_rows} row(s) failed, "
        f"on_fail {count.on_fail} (batch {rel})"
    )
