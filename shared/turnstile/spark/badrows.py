"""Why a row did not fit the schema: the first column whose value does not parse as its type.

The reader only says "this line did not fit". Re-parsing the set-aside lines twice, once with every
column as text and once with the schema's types (Spark keeps the fields that do parse), shows the
first column whose text is there but whose typed value is not.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as f
from pyspark.sql.types import StringType, StructField, StructType

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import CorruptRecord
from turnstile.spark import mapping
from turnstile.spark.reading import ReadBatch, line_options
from turnstile.spark.staging import as_uploaded, literal
from turnstile.state.records import ManifestBatch
from turnstile.store.port import ObjectStore, object_uri

SAMPLE = 1000  # bad rows written to `_failed/` and diagnosed, at most


@dataclass(frozen=True)
class Culprit:
    column: str
    type: str  # the schema's type, as Spark spells it (`int`, `date`)
    value: str  # the text that does not parse as `type`

    def describe(self) -> str:
        return f"column {self.column!r} ({self.type}) cannot hold {self.value!r}"


def culprits(
    spark: SparkSession, rows: list[str], load: LoadConfig, columns: StructType | None
) -> list[Culprit | None]:
    """Per raw row, the first of `columns` (what the rows were parsed as) whose value does not parse
    as its type; None when Spark cannot tell (a malformed line, a wrong number of fields, or a format
    this does not apply to)."""
    if not rows or columns is None or load.format not in ("csv", "json", "jsonl"):
        return [None] * len(rows)
    fields = columns.fields
    options = line_options(load)
    # CSV is positional: parse under neutral names, so any column name is safe in the DDL string.
    typed = StructType([StructField(f"c{i}", x.dataType, True) for i, x in enumerate(fields)])
    texts = StructType([StructField(f"c{i}", StringType(), True) for i in range(len(fields))])
    if load.format != "csv":  # JSON matches by name
        typed = StructType([StructField(x.name, x.dataType, True) for x in fields])
        texts = StructType([StructField(x.name, StringType(), True) for x in fields])

    def parse(schema: StructType) -> Column:
        raw = f.col("raw")
        if load.format == "csv":
            return f.from_csv(raw, schema.simpleString(), {**options, "mode": "PERMISSIVE"})
        return f.from_json(raw, schema, {**options, "mode": "PERMISSIVE"})

    frame = spark.createDataFrame([(row,) for row in rows], "raw STRING")
    try:
        parsed = frame.select(parse(texts).alias("text"), parse(typed).alias("typed")).collect()
    except PySparkException:  # a reader option a single-line parser refuses: the rows speak for themselves
        return [None] * len(rows)
    found: list[Culprit | None] = []
    for row in parsed:
        text, value = row["text"], row["typed"]
        culprit = None
        for i, field in enumerate(fields):
            given = text[i] if text is not None else None
            if given is not None and (value is None or value[i] is None):
                culprit = Culprit(field.name, field.dataType.simpleString(), given)
                break
        found.append(culprit)
    return found


def report_line(
    row: str, culprit: Culprit | None, load: LoadConfig, columns: StructType | None
) -> dict[str, str]:
    """One line of the bad-rows file: the raw row, why, and the column and value when known."""
    given = load.schema_ or (
        columns.simpleString().removeprefix("struct<").removesuffix(">") if columns else ""
    )
    reason = f"does not match the {'schema' if load.schema_ else 'columns read'} {given}"
    if culprit is None:
        return {"row": row, "reason": reason}
    return {
        "row": row,
        "reason": f"{reason}: {culprit.describe()}",
        "column": culprit.column,
        "value": culprit.value,
    }


def set_aside(
    spark: SparkSession,
    store: ObjectStore,
    batch: ManifestBatch,
    bad: tuple[ReadBatch, mapping.Mapped],
    load: LoadConfig,
) -> None:
    """Write the rows that did not parse (`bad`'s read), then those a mapping cast failed on, to
    `_failed/` in `store`; CorruptRecord when together they are more than max_bad_records."""
    read, mapped = bad
    sample = [row[0] for row in read.bad.limit(SAMPLE).collect()] if read.bad is not None else []
    found = culprits(spark, sample, load, read.columns)
    files = files_of(spark, sample, read, batch.data_uris)
    lines = [
        report_line(row, why, load, read.columns) | ({"file": files[row]} if row in files else {})
        for row, why in zip(sample, found, strict=True)
    ]
    diagnosed = [(row, why.describe(), why.column) for row, why in zip(sample, found, strict=True) if why]
    if mapped.bad is not None:
        cast_failures = mapping.bad_row_lines(mapped.bad, load.mapping, SAMPLE)
        lines += cast_failures
        diagnosed += [(line["row"], line["reason"], line["column"]) for line in cast_failures]
    name = f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl"
    store.write(name, "".join(json.dumps(line) + "\n" for line in lines).encode())
    count = read.bad_rows + mapped.bad_rows
    if count > load.max_bad_records:
        row, first, column = diagnosed[0] if diagnosed else (None, None, None)
        shown = f"{row!r} in {files[row]}" if row in files else repr(row)
        where = f"; the first: {first} (row {shown})" if first else ""
        failed = "could not be parsed or cast" if mapped.bad_rows else "could not be parsed"
        fix = "schema or mapping" if mapped.bad_rows else "schema"
        raise CorruptRecord(
            f"{count} row(s) {failed} (max_bad_records is {load.max_bad_records}){where}; "
            f"they are in {object_uri(store, name)}. Fix the data (or the {fix} in load.json) and "
            f"re-upload, or raise max_bad_records.{_json_array_hint(sample, load)}",
            column=column,
            value=sample[0] if sample else row,
            rows_read=read.rows_read,
            bad_rows=count,
        )


def files_of(spark: SparkSession, rows: list[str], read: ReadBatch, uris: Sequence[str]) -> dict[str, str]:
    """The object each bad row came from, as uploaded (gs:// or s3://): one more pass over the
    files' lines, on this failure path only. A row over several lines (a quoted line break) is not
    found, nor one Spark read from a file it names in another form."""
    if not rows or not read.paths or len(read.paths) != len(uris):
        return {}
    lines = (
        spark.read.text([literal(path) for path in read.paths])
        .where(f.col("value").isin(list(set(rows))))
        .select("value", f.input_file_name().alias("file"))
        .limit(2 * SAMPLE)
        .collect()
    )
    found: dict[str, str] = {}
    for line in lines:
        named = as_uploaded(line["file"], uris, read.paths)
        if "://" in named and not named.startswith("file:"):
            found.setdefault(line["value"], named)
    return found


def _json_array_hint(sample: list[str], load: LoadConfig) -> str:
    """JSON lines read one object a line: a file holding one array (or pretty-printed objects) is
    all bad rows, and its `[` line says so."""
    if load.format not in ("json", "jsonl") or not any(row.strip() in ("[", "]", "{", "}") for row in sample):
        return ""
    return (
        " The files look like JSON arrays or objects over several lines, where format json reads one "
        'object a line: set "reader_options": {"multiLine": true} in load.json for such files.'
    )
