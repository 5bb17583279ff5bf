"""Reads one batch's files into a DataFrame, setting aside rows that do not parse."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
from pyspark.sql import functions as f
from pyspark.sql.types import AtomicType, StringType, StructField, StructType

from turnstile.config import ddl
from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import BatchFailed
from turnstile.names.batchfiles import GLOB_CHARACTERS
from turnstile.spark import messages
from turnstile.spark.schema import widens
from turnstile.spark.staging import literal

CORRUPT = "_turnstile_unparsed"
SOURCE = "_turnstile_source"  # each row's file, read when load.json has expectations (`spark.expectations`)
_SPARK_FORMAT = {
    "csv": "csv",
    "json": "json",
    "jsonl": "json",
    "parquet": "parquet",
    "orc": "orc",
    "avro": "avro",
    "text": "text",
}
AVRO_MISSING = (
    "format 'avro' needs Spark's avro data source, the jar org.apache.spark:spark-avro built for this "
    "Spark and Scala (spark-avro_2.12 for the local pyspark 3.5), which Dataproc's runtimes include; "
    "this Spark session has none: add the jar to spark.jars (JOB_JAR_URIS on Dataproc), or run the "
    "table's batches on Dataproc"
)


@dataclass
class ReadBatch:
    rows: DataFrame  # the rows that parsed
    bad: DataFrame | None  # one column, the raw text of each row that did not
    rows_read: int
    bad_rows: int
    cached: DataFrame | None = None  # the cached read that `rows` and `bad` derive from
    # Read in FAILFAST, neither cached nor counted: a row that does not parse fails the write
    # (nothing is committed) and the batch is read again the careful way; its rows are the commit's.
    strict: bool = False
    columns: StructType | None = None  # what a text batch's rows were parsed as (`schema` or inferred)
    paths: tuple[str, ...] = ()  # the files read (the careful read of text): where bad rows are looked up

    def release(self) -> None:
        """Drop the cached read. Spark finds a cache by plan, and a plan over the same paths is
        the same plan: a batch re-uploaded under the same file names would read the stale cache."""
        if self.cached is not None:
            self.cached.unpersist()
            if SOURCE in self.cached.columns:  # checkpointed (`_kept`): its blocks are the RDD's
                self.cached._jdf.queryExecution().logical().rdd().unpersist(False)


def _options(load: LoadConfig) -> dict[str, str]:
    options: dict[str, str] = {}
    if load.format == "csv":
        options |= {
            "header": "true",
            "inferSchema": "true",
            # RFC 4180, as BigQuery reads CSV: `""` is a quote inside a quoted field (Spark's own
            # default, `\"`, kept `"he said ""hi"""` with its quotes), and a quoted field may hold
            # line breaks (Spark's default cut such a row in two: a truncated value and a fragment).
            "escape": '"',
            "multiLine": "true",
            # Spark's default maps a header's columns to the schema by position whatever they are
            # named: a file with its columns in another order would load into the wrong columns.
            "enforceSchema": "false",
        }
    options |= {
        key: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in load.reader_options.items()
    }
    return options


def read(
    spark: SparkSession,
    paths: list[str],
    load: LoadConfig,
    *,
    base_path: str | None = None,
    strict: bool = False,
    known: StructType | None = None,
) -> ReadBatch:
    """Read the batch's files, each as itself (`paths` are the files' own names, not patterns);
    with `base_path` (the batch folder, for nested batches; Spark takes it as it is) Spark's
    partition discovery turns `key=value` folders below it into columns. `strict`: the lean read
    (see `ReadBatch.strict`), for a batch whose rows are written as read. `known`: the table's
    columns, whose types a text batch without a `schema` is read with (see `inferred_schema`)."""
    options = _options(load)
    if options.get("multiLine") == "true" and "multiLine" not in load.reader_options and _patterns(paths):
        options["multiLine"] = "false"  # Spark's multi-line CSV reader takes each name as a pattern
    reader = spark.read.format(_SPARK_FORMAT[load.format]).options(**options)
    if not paths:
        raise ValueError("a batch with no data files")
    if base_path is not None:
        reader = reader.option("basePath", base_path)
    textual = load.format in ("csv", "json", "jsonl")
    # A text batch without a `schema` is read with the one Spark infers, so its bad rows show.
    inferred = inferred_schema(spark, paths, load, options, known) if textual and not load.schema_ else None
    schema: StructType | None = None  # of the careful read, parsing row by row
    if strict and (load.schema_ is not None or inferred is not None):
        reader = (
            reader.schema(inferred)
            if inferred is not None
            else _with_schema(spark, reader, load.schema_ or "")
        )
        if textual:
            reader = reader.option("mode", "FAILFAST")
    elif (schema := _parsed(spark, load.schema_) if load.schema_ is not None else inferred) is not None:
        if textual:  # rows that do not fit the schema land in CORRUPT instead of failing the read
            schema = StructType([*schema.fields, StructField(CORRUPT, StringType(), True)])
            reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        reader = reader.schema(schema)
    try:
        frame = reader.load([literal(path) for path in paths])
    except Exception as exc:
        if load.format == "avro" and "Failed to find data source: avro" in str(exc):
            raise ValueError(AVRO_MISSING) from exc
        raise
    if load.expectations:  # input_file_name() is empty once cached: taken as the rows are read
        frame = frame.withColumn(SOURCE, f.input_file_name())
    if strict:
        return ReadBatch(frame, None, 0, 0, strict=True)
    if CORRUPT not in frame.columns or schema is None:  # no text: nothing parsed row by row
        frame = _kept(frame)
        count = frame.count()
        return ReadBatch(frame, None, count, 0, frame)
    cached = _kept(frame)  # Spark refuses queries on the corrupt-record column of an uncached read
    if load.jagged_rows:  # a row that is only short is not a bad row: its missing columns are null
        fields = [x.name for x in schema.fields if x.name != CORRUPT]  # not partition columns
        frame = cached.withColumn(CORRUPT, f.when(~_short_only(fields, load), f.col(CORRUPT)))
    else:
        frame = cached
    bad = frame.filter(f.col(CORRUPT).isNotNull()).select(CORRUPT)
    rows = frame.filter(f.col(CORRUPT).isNull()).drop(CORRUPT)
    # Both counts in one pass (it also fills the cache the write then reads from).
    counted = frame.agg(f.count(f.lit(1)).alias("total"), f.count(f.col(CORRUPT)).alias("bad")).collect()[0]
    total, bad_rows = int(counted["total"]), int(counted["bad"])
    parsed_as = StructType([x for x in schema.fields if x.name != CORRUPT])
    return ReadBatch(
        rows, bad if bad_rows else None, total, bad_rows, cached, columns=parsed_as, paths=tuple(paths)
    )


def _kept(frame: DataFrame) -> DataFrame:
    """The read kept for the passes over it (counts, bad rows, the write): cached; with each row's
    object (SOURCE) checkpointed instead (filled by the first pass, as a cache is), so that no later
    plan holds input_file_name(): a MERGE refuses a source plan holding that nondeterministic
    expression, and its check runs before a cache would stand in for the plan."""
    return frame.localCheckpoint(eager=False) if SOURCE in frame.columns else frame.cache()


def inferred_schema(
    spark: SparkSession, paths: list[str], load: LoadConfig, options: dict[str, str], known: StructType | None
) -> StructType:
    """The columns of a text batch without a `schema`, as Spark infers them from its files (their
    data columns only: no `key=value` folder columns), so that the batch is then read with them and
    a row that does not fit is a bad row, as with a `schema` (Spark's inferring read kept a JSON line
    that did not parse as a `_corrupt_record` column, dropped a CSV row's extra fields and read every
    CSV file after the first by the first one's header). A column the table has is read as the
    table's type, unless the batch's is one the table may widen to: `2` in a double column is 2.0,
    and `02134` in a string column keeps its zero, where inferred as int they failed the batch."""
    found = (
        spark.read.format(_SPARK_FORMAT[load.format])
        .options(**options)
        .option("columnNameOfCorruptRecord", CORRUPT)
        .load([literal(path) for path in paths])
        .schema
    )
    table = {x.name.lower(): x.dataType for x in known.fields} if known is not None else {}
    fields = []
    for field in found.fields:
        if field.name == CORRUPT:
            continue
        kind = table.get(field.name.lower())
        if (
            kind is None
            or not isinstance(kind, AtomicType)
            or kind == field.dataType
            or widens(kind.simpleString(), field.dataType.simpleString())
        ):
            fields.append(field)
        else:
            fields.append(StructField(field.name, kind, True))
    return StructType(fields)


def refuse_unknown_fields(spark: SparkSession, paths: list[str], load: LoadConfig, rel: str) -> None:
    """BatchFailed naming the fields of a JSON batch its schema lacks (see `unknown_fields`)."""
    dropped = unknown_fields(spark, paths, load)
    if dropped:
        raise BatchFailed(
            f"batch {rel!r} has field(s) {', '.join(map(repr, dropped[:10]))} that the schema in "
            "load.json does not, whose values Spark would drop (names match exactly, case included): "
            'add them to the schema, or set "ignore_unknown_values": true to drop them'
        )


def unknown_fields(spark: SparkSession, paths: list[str], load: LoadConfig) -> list[str]:
    """Top-level fields of a JSON batch that `schema` lacks, which Spark's reader drops without a
    word; it matches names exactly, so `ID` for the schema's `id` is one too (none unless the format
    is json with a schema, one object a line, and ignore_unknown_values is off). One pass over the
    files' text."""
    multiline = any(
        k.lower() == "multiline" and str(v).lower() == "true" for k, v in load.reader_options.items()
    )
    if (
        load.format not in ("json", "jsonl")
        or load.schema_ is None
        or load.ignore_unknown_values
        or multiline
    ):
        return []
    try:
        known = set(ddl.fields(load.schema_))
    except ValueError:
        return []
    keys = (
        spark.read.text([literal(path) for path in paths])
        .select(f.explode(f.json_object_keys("value")).alias("key"))
        .distinct()
    )
    return sorted(row["key"] for row in keys.collect() if row["key"] not in known)


HEADER_MISMATCH = "CSV header does not conform to the schema"


def failure_text(exc: BaseException) -> str:
    """Why a read failed, and for a header that does not name the schema's columns, what to do."""
    text = messages.reason(exc)
    twice = _named_twice(text)
    if twice is not None:
        return (
            f"{text}; the header names column {twice!r} more than once (any case): give each column a "
            "name of its own upstream, or a schema with reader_options.enforceSchema true to map them "
            "by position"
        )
    if HEADER_MISMATCH in text:
        text += (
            "; each file's header must name the columns in one order (any case): that of load.json's "
            "schema, or without one, that of the batch's first file: fix the files' header or the "
            "schema, or set reader_options.enforceSchema to true to map columns by position whatever "
            "the header says (as a BigQuery load does)"
        )
    return text


def _named_twice(text: str) -> str | None:
    """The first name Spark's header-mismatch message lists twice in `Header: a, b, b Schema:`."""
    if HEADER_MISMATCH not in text or "Header: " not in text or " Schema: " not in text:
        return None
    names = [n.strip().lower() for n in text.partition("Header: ")[2].partition(" Schema: ")[0].split(",")]
    return next((n for i, n in enumerate(names) if n in names[:i]), None)


def _with_schema(spark: SparkSession, reader: DataFrameReader, ddl: str) -> DataFrameReader:
    """The DDL as is: one round trip, where a StructType costs a session lookup and a JSON parse.
    A form only PySpark's parser takes ("a: int, ...") goes through it."""
    try:
        return reader.schema(ddl)
    except Exception:  # Spark's ParseException
        return reader.schema(_parsed(spark, ddl))


_SCHEMAS: dict[str, StructType] = {}  # DDL -> its schema: the same in any session of the driver


def _parsed(spark: SparkSession, ddl: str) -> StructType:
    """The schema a DDL string names, parsed by Spark once per process (a Spark call per batch
    otherwise)."""
    if ddl not in _SCHEMAS:
        _SCHEMAS[ddl] = spark.createDataFrame([], ddl).schema
    return _SCHEMAS[ddl]


def _short_only(columns: list[str], load: LoadConfig) -> Column:
    """True for a row flagged as not fitting the schema only because trailing columns are missing
    (Spark's CSV reader flags any row whose field count differs from the schema, and fills the
    fields it has): its raw text, split by Spark's own CSV parser into one more string field than
    the schema has, has no field past the schema's and no field whose typed value came out null."""
    spare = "_turnstile_spare"
    ddl = ", ".join(f"`{i}` STRING" for i in range(len(columns))) + f", {spare} STRING"
    options = line_options(load)
    fields = f.from_csv(f.col(CORRUPT), ddl, options)
    fits = fields[spare].isNull()
    for i, name in enumerate(columns):
        fits = fits & ~(fields[str(i)].isNotNull() & f.col(f"`{name}`").isNull())
    return f.col(CORRUPT).isNotNull() & fits


# Reader options about files or the whole read, not about how one line splits into fields.
_NOT_FOR_ONE_LINE = frozenset(
    {
        "header",
        "enforceschema",
        "inferschema",
        "samplingratio",
        "mode",
        "columnnameofcorruptrecord",
        "multiline",
        "encoding",
    }
)


def _patterns(paths: list[str]) -> bool:
    """Whether a path holds what Hadoop's FileInputFormat, which Spark's multi-line CSV reader hands
    the files to, takes as a pattern or a separator (the line reader takes each name as itself)."""
    names = (path.partition("://")[2] or path for path in paths)  # not the `gs://` of a URI
    return any(set(name) & set(GLOB_CHARACTERS + ",:") for name in names)


def line_options(load: LoadConfig) -> dict[str, str]:
    """The reader's options that also apply to parsing one raw line (`from_csv`, `from_json`)."""
    return {k: v for k, v in _options(load).items() if k.lower() not in _NOT_FOR_ONE_LINE}
