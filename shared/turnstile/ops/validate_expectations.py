"""`turnstile validate` on load.json's `expectations`: each check through Spark's own parser, and,
when the batch's columns are known (its `schema`, or a sample of its first data file, after its
`mapping`), whether the columns it names resolve.

Spark starts only when a load.json has expectations: pyspark is imported then, as `turnstile query`
does, and a local session (no catalog, no data) parses and resolves each check; nothing runs. Where
pyspark or Java is missing, the checks are left to the job, and a warning says so once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Protocol

from turnstile.config.ddl import Fields
from turnstile.config.load_config import LoadConfig
from turnstile.config.mapping_fields import play
from turnstile.names.paths import Batch
from turnstile.ops import validate_mapping
from turnstile.spark import placeholders, sql
from turnstile.store.port import ObjectStore

# What each `${...}` an expectation may use stands for here (the job fills the batch's own values).
_PLACEHOLDERS = {
    "table": placeholders.name("catalog", "dataset", "table"),
    "catalog": placeholders.name("catalog"),
    "dataset": placeholders.name("dataset"),
    "table_name": placeholders.name("table"),
    "rel": placeholders.string(""),
    "generation": placeholders.number(0),
    "window_start": placeholders.timestamp(datetime(2000, 1, 1, tzinfo=UTC)),
    "window_end": placeholders.timestamp(datetime(2000, 1, 1, tzinfo=UTC)),
}
_NOT_HERE = ("TABLE_OR_VIEW_NOT_FOUND",)  # a table a check reads exists where the job runs, not here


class Checker(Protocol):
    """Spark's judgement of one expression; each returns Spark's error, None when there is none."""

    unavailable: str | None  # why nothing was checked (no pyspark, no Java), once asked

    def parse(self, text: str) -> str | None: ...

    def resolve(self, text: str, columns: str, *, typed: bool) -> str | None:
        """Over rows of `columns` (Spark DDL); not `typed` (all strings): only unknown columns count."""
        ...


def config_problems(expectations: object, checker: Checker) -> list[str]:
    """Per check of one load.json (its raw `expectations`) that Spark's parser refuses, or whose
    placeholders are unknown: `expectations[i].check ...: Spark's error`."""
    if not isinstance(expectations, list) or not expectations:
        return []
    found = []
    for index, entry in enumerate(expectations):
        text = entry.get("check") if isinstance(entry, dict) else None
        if not isinstance(text, str) or not text.strip():
            continue  # the model says what is wrong with it
        try:
            filled = placeholders.fill(text, _PLACEHOLDERS)
        except placeholders.Unfilled as exc:
            found.append(f"expectations[{index}].check {exc}")
            continue
        if (error := checker.parse(filled)) is not None:
            found.append(f"expectations[{index}].check ({text}) does not parse: {error}")
    return found


def batch_problems(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    listing: tuple[list[str], dict[str, int]],
    success_filename: str,
    *,
    checker: Checker,
) -> list[str]:
    """Per check naming a column the batch will not have: over `schema` (typed) when there is no
    mapping, else over the batch's fields (from `schema` or a sample) as the mapping leaves them."""
    if not load.expectations:
        return []
    fields = validate_mapping.batch_fields(store, batch, load, listing, success_filename)
    if load.schema_ is not None and not load.mapping:
        columns, typed = load.schema_, True
    elif fields is not None:
        columns, typed = _ddl(play(fields, load.mapping)[0] if load.mapping else fields), False
    else:
        return []
    found = []
    for index, expectation in enumerate(load.expectations):
        try:
            filled = placeholders.fill(expectation.check, _PLACEHOLDERS)
        except placeholders.Unfilled:
            continue  # said with its load.json
        if checker.parse(filled) is not None:
            continue  # said with its load.json
        if (error := checker.resolve(filled, columns, typed=typed)) is not None:
            found.append(
                f"expectations[{index}].check ({expectation.check}) cannot run on this batch: {error}"
            )
    return found


def _ddl(fields: Fields) -> str:
    """The fields as Spark DDL, every value a string (a struct's fields too)."""

    def kind(sub: Fields | None) -> str:
        if sub is None:
            return "STRING"
        return f"STRUCT<{', '.join(f'{sql.quote(n)}: {kind(s)}' for n, s in sub.items())}>"

    return ", ".join(f"{sql.quote(name)} {kind(sub)}" for name, sub in fields.items())


class SparkChecker:
    """A `Checker` over a local Spark session, started at its first question (or the one given)."""

    def __init__(self, spark: Any = None) -> None:
        self._spark = spark
        self.unavailable: str | None = None

    def _session(self) -> Any:
        if self._spark is None and self.unavailable is None:
            try:
                from pyspark.sql import SparkSession  # noqa: PLC0415  (keep pyspark out of other commands)

                self._spark = (
                    SparkSession.builder.master("local[1]")
                    .appName("turnstile-validate")
                    .config("spark.ui.enabled", "false")
                    .getOrCreate()
                )
            except Exception as exc:  # no pyspark, no Java: the job is the judge then
                self.unavailable = (
                    f"the expectations' checks were not parsed: Spark did not start here ({_line(exc)}); "
                    "install turnstile[job] (pyspark) and Java 17 to check them before a batch does"
                )
        return self._spark

    def parse(self, text: str) -> str | None:
        spark = self._session()
        if spark is None:
            return None
        try:
            spark._jsparkSession.sessionState().sqlParser().parseExpression(text)
        except Exception as exc:  # ParseException, converted by pyspark or raw from py4j
            return _line(exc)
        return None

    def resolve(self, text: str, columns: str, *, typed: bool) -> str | None:
        spark = self._session()
        if spark is None:
            return None
        from pyspark.errors import AnalysisException  # noqa: PLC0415
        from pyspark.sql import functions as f  # noqa: PLC0415

        try:
            spark.createDataFrame([], columns).where(f.expr(text))
        except AnalysisException as exc:
            kind = exc.getErrorClass() or ""
            if kind.startswith(_NOT_HERE):
                return None
            return _line(exc) if typed or kind.startswith("UNRESOLVED_") else None
        return None


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__
