"""Applies load.json's `mapping` to a batch's rows, entry by entry in list order.

The fields each entry needs are checked first, over the batch's schema (`mapping_fields.play`),
so a wrong entry fails the batch before any row is touched, naming the entry. A cast runs as
Spark's `try_cast`: a row whose non-null value does not convert is a bad row, set aside with the
entry, the field and the value, and counted with the rows that did not parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as f
from pyspark.sql.types import StructType

from turnstile.config.ddl import Fields
from turnstile.config.mapping import Cast, Constant, Default, Entry, FromPath, Remove, Rename, describe
from turnstile.config.mapping_fields import check, lookup, missing, path_value, removal
from turnstile.core.errors import BatchFailed
from turnstile.spark.reading import SOURCE
from turnstile.spark.sql import quote

RAW = "_turnstile_raw_row"  # the row as it was read, as JSON: what a bad row's line holds
FAILED = "_turnstile_failed_cast"  # the first cast that failed on the row: entry, field, type, value
MOVING = "_turnstile_moving"  # a renamed field's value, while its old place is dropped
_HIDDEN = (RAW, FAILED, MOVING)
_CARRIED = (SOURCE,)  # kept through the mapping, never mapped (the expectations read it)


@dataclass(frozen=True)
class Mapped:
    rows: DataFrame  # the mapped rows whose casts all succeeded
    bad: DataFrame | None  # per bad row: row (JSON), entry, field, type, value
    bad_rows: int


@dataclass(frozen=True)
class BatchPath:
    """Where the batch sits, for `from_path` entries."""

    rel: str
    natural_time: datetime | None
    config: str = "load.json"  # the load.json whose mapping this is (its URI when known)


def fields_of(schema: StructType) -> Fields:
    """A Spark schema as a field tree (hidden bookkeeping columns left out)."""
    return {
        x.name: fields_of(x.dataType) if isinstance(x.dataType, StructType) else None
        for x in schema.fields
        if x.name not in _HIDDEN + _CARRIED
    }


def field_sql(path: tuple[str, ...]) -> str:
    """A (nested) field as a SQL expression: `payload`.`user`.`id`."""
    return ".".join(quote(name) for name in path)


def try_cast_sql(path: tuple[str, ...], kind: str) -> str:
    """The SQL of a cast that gives null instead of failing (whatever spark.sql.ansi.enabled says)."""
    return f"try_cast({field_sql(path)} AS {kind})"


def apply(frame: DataFrame, entries: tuple[Entry, ...], where: BatchPath) -> Mapped:
    """The rows after the mapping; BatchFailed naming the entry when one does not fit the batch."""
    if not entries:
        return Mapped(frame, None, 0)
    try:
        return _apply(frame, entries, where)
    except AnalysisException as exc:  # e.g. a default whose value the column's type cannot take
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BatchFailed(
            f"the mapping in {where.config} fails on batch {where.rel!r}: {first}; fix the mapping"
        ) from exc


def has_casts(entries: tuple[Entry, ...]) -> bool:
    """Whether a value may fail the mapping: a cast, or a typed default over a column the batch
    has, that does not convert is a bad row."""
    return any(isinstance(entry, Cast) or (isinstance(entry, Default) and entry.type) for entry in entries)


def _apply(frame: DataFrame, entries: tuple[Entry, ...], where: BatchPath) -> Mapped:
    problems = check(fields_of(frame.schema), entries)
    if problems:
        raise BatchFailed(
            f"the mapping in {where.config} does not fit batch {where.rel!r}: " + "; ".join(problems)
        )
    _check_literals(frame, entries, where)
    casts = has_casts(entries)
    if casts:
        original = [f.col(quote(c)) for c in frame.columns]
        raw = [f.col(quote(c)) for c in frame.columns if c not in _CARRIED]
        frame = frame.select(
            *original,
            f.to_json(f.struct(*raw)).alias(RAW),
            f.lit(None).cast("struct<entry:int,field:string,type:string,value:string>").alias(FAILED),
        )
    for index, entry in enumerate(entries):
        frame = _step(frame, index, entry, where)
    if not casts:
        return Mapped(frame, None, 0)
    failed = f.col(FAILED)
    bad = frame.filter(failed.isNotNull()).select(
        f.col(RAW).alias("row"),
        failed["entry"].alias("entry"),
        failed["field"].alias("field"),
        failed["type"].alias("type"),
        failed["value"].alias("value"),
    )
    rows = frame.filter(failed.isNull()).drop(*_HIDDEN)
    count = bad.count()
    return Mapped(rows, bad if count else None, count)


def _check_literals(frame: DataFrame, entries: tuple[Entry, ...], where: BatchPath) -> None:
    """A typed constant or default whose value its type cannot take would be null on every row
    (a non-ANSI cast): the batch fails instead. One query over one row, for all of them."""
    typed = [
        (index, entry)
        for index, entry in enumerate(entries)
        if isinstance(entry, Constant | Default) and entry.type and entry.value is not None
    ]
    if not typed:
        return
    literals = frame.sparkSession.range(1).select(
        *[f.lit(entry.value).alias(f"v{index}") for index, entry in typed]
    )
    row = literals.select(
        *[f.expr(try_cast_sql((f"v{index}",), str(entry.type))) for index, entry in typed]
    ).first()
    wrong = [
        describe(index, entry)
        for (index, entry), value in zip(typed, row or (), strict=False)
        if value is None
    ]
    if wrong:
        raise BatchFailed(
            f"the mapping in {where.config}: {', '.join(wrong)}: the value cannot be of its type, so the "
            "column would be null on every row; fix the value or the type"
        )


def _step(frame: DataFrame, index: int, entry: Entry, where: BatchPath) -> DataFrame:
    fields = fields_of(frame.schema)
    if isinstance(entry, Rename | Remove):
        path = _found(fields, entry.rename if isinstance(entry, Rename) else entry.remove)
        if isinstance(entry, Remove):
            return _drop(frame, removal(fields, path))
        frame = frame.withColumn(MOVING, f.expr(field_sql(path)))  # read before its struct changes
        frame = _drop(frame, removal(fields, path))
        return _put(frame, entry.to, f.col(MOVING)).drop(MOVING)
    if isinstance(entry, Cast):
        return _cast(frame, index, entry, _found(fields, entry.cast))
    if isinstance(entry, Constant):
        constant = f.lit(entry.value)
        return _put(frame, entry.constant, constant.cast(entry.type) if entry.type else constant)
    if isinstance(entry, Default):
        return _default(frame, index, entry)
    try:
        found = path_value(index, entry, where.rel, where.natural_time)
    except ValueError as exc:
        raise BatchFailed(str(exc)) from exc
    return _put(frame, entry.to, _typed(f.lit(found), entry))


def _typed(value: Column, entry: FromPath) -> Column:
    return value.cast(entry.type) if entry.type else value


def _found(fields: Fields, dotted: str) -> tuple[str, ...]:
    path = lookup(fields, dotted)
    if path is None:  # check() found every field before the first step: a mapping bug if so
        raise BatchFailed(f"the mapping in load.json: {missing(fields, dotted)}")
    return path


def _put(frame: DataFrame, name: str, value: Column) -> DataFrame:
    """`name` set to `value`: in its place when the batch has it (any case), else at the end."""
    existing = next((c for c in frame.columns if c.lower() == name.lower()), None)
    if existing is None:
        return frame.select(*[f.col(quote(c)) for c in frame.columns], value.alias(name))
    return frame.select(*[value.alias(name) if c == existing else f.col(quote(c)) for c in frame.columns])


def _drop(frame: DataFrame, path: tuple[str, ...]) -> DataFrame:
    if len(path) == 1:
        return frame.drop(path[0])
    # dropFields reads a dotted name as a path, so a struct field is named relative to its column.
    return _put(frame, path[0], f.col(quote(path[0])).dropFields(".".join(path[1:])))


def _cast(frame: DataFrame, index: int, entry: Cast, path: tuple[str, ...]) -> DataFrame:
    value = f.expr(field_sql(path))
    converted = f.expr(try_cast_sql(path, entry.type))
    failure = f.struct(
        f.lit(index).alias("entry"),
        f.lit(".".join(path)).alias("field"),
        f.lit(entry.type).alias("type"),
        value.cast("string").alias("value"),
    )
    failed = f.coalesce(f.col(FAILED), f.when(value.isNotNull() & converted.isNull(), failure))
    frame = frame.withColumn(FAILED, failed)
    if len(path) == 1:
        return _put(frame, path[0], converted)
    return _put(frame, path[0], f.col(quote(path[0])).withField(".".join(path[1:]), converted))


def _default(frame: DataFrame, index: int, entry: Default) -> DataFrame:
    existing = next((x for x in frame.schema.fields if x.name.lower() == entry.default.lower()), None)
    fallback = f.lit(entry.value)
    if entry.type:
        fallback = fallback.cast(entry.type)
    if existing is None:
        return _put(frame, entry.default, fallback)
    if entry.type:  # the batch's own values convert as a cast's do: one that does not is a bad row
        own = Cast.model_construct(cast=existing.name, type=entry.type)
        frame = _cast(frame, index, own, (existing.name,))
    kind = entry.type or existing.dataType.simpleString()
    return _put(frame, existing.name, f.coalesce(f.col(quote(existing.name)), fallback.cast(kind)))


def bad_row_lines(bad: DataFrame, entries: tuple[Entry, ...], limit: int) -> list[dict[str, str]]:
    """The bad-rows file's lines for (at most `limit` of) the rows a cast failed on: the row as
    JSON, why (`mapping[2] (cast 'amount'): field 'amount' (int) cannot hold 'x'`), the field and
    the value."""
    return [
        {
            "row": row["row"],
            "reason": f"{describe(row['entry'], entries[row['entry']])}: field {row['field']!r} "
            f"({row['type']}) cannot hold {row['value']!r}",
            "column": row["field"],
            "value": row["value"],
        }
        for row in bad.limit(limit).collect()
    ]
