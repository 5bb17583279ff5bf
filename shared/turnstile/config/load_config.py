"""How to read a batch and write it to its Iceberg table: the merged `load.json`, as a typed value.

The config cascade (`turnstile.config.cascade`) builds it; the manifest carries it to the job.
"""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from turnstile.config import audits as batch_audits
from turnstile.config import ddl
from turnstile.config import expectations as row_expectations
from turnstile.config import mapping as field_mapping
from turnstile.config.lineage_config import (
    DEFAULT_MAX_GAP_WAIT,
    DerivedSteps,
    Duration,
    GapsMode,
    Lineage,
    NaturalTimeRegex,
    dependency,
    lineage,
)
from turnstile.config.lineage_config import Dependency as _Dependency
from turnstile.names.naturaltime import parse_duration

NESTED_BY_DEFAULT = frozenset({"parquet", "orc", "avro"})
"""Formats whose batches are nested folders unless `nested` says otherwise."""


class LoadConfig(BaseModel):
    """How to read a batch and write it to its Iceberg table (the merged `load.json`)."""

    # Field types are strict where JSON has the type: `"5"` is not 5, and `"yes"` or 1 not true.
    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True
    )

    format: Literal["csv", "json", "jsonl", "parquet", "orc", "avro", "text"] = "csv"
    """File format of the data files (`json` and `jsonl` both mean one JSON object per line).
    Gzip-compressed files (`.gz`) are read transparently."""

    nested: StrictBool | None = None
    """Whether a batch is every data file under its folder at any depth (`key=value` folders become
    columns), as Spark and Hive write; default true for parquet, orc and avro, false otherwise."""

    jagged_rows: StrictBool = False
    """CSV: a row with missing trailing columns is read with nulls for them instead of being a
    bad row (checked when a `schema` is given)."""

    ignore_unknown_values: StrictBool = False
    """JSON with a `schema`: fields the schema does not have are dropped (as BigQuery's option
    does); by default a batch holding such a field fails, naming it, so no value is lost unseen."""

    reader_options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Spark DataFrameReader options, e.g. `{"delimiter": ";"}`; CSV defaults to `header: true`."""

    schema_: str | None = Field(None, alias="schema")
    """Explicit schema as Spark DDL (`id BIGINT, name STRING, ts TIMESTAMP`); default: inferred."""

    mode: Literal["append", "merge", "overwrite", "overwrite_partitions", "replace_window"] = "append"
    """append rows; merge (MERGE INTO on `merge_keys`); overwrite (replace the table atomically);
    overwrite_partitions (replace only the table partitions the batch has rows for); replace_window
    (a derived table's step: the rows of its window on `time_column` replaced, in one commit)."""

    merge_keys: tuple[str, ...] = ()
    """Columns identifying a row for `mode: merge`."""

    merge_order_by: str | None = None
    """Column deciding which of several source rows with one key wins (the largest value)."""

    delete_column: str | None = None
    """Boolean column of change-data batches: a true value deletes the row in `mode: merge`."""

    table_schema: str | None = None
    """Spark DDL of the destination when the job creates it (`id INT, s STRING`); default: the
    batch's own columns. Needed when a DML transform.sql writes columns the batch does not have."""

    partition_by: tuple[str, ...] = ()
    """Iceberg partition transforms used when the table is created, e.g. `["days(ts)"]`."""

    table_properties: dict[str, str] = Field(default_factory=dict)
    """Iceberg table properties set when the table is created."""

    max_bad_records: StrictInt = Field(0, ge=0)
    """Rows that fail to parse or cast and may be set aside in `_failed/` before the batch fails."""

    schema_evolution: Literal["none", "add_columns"] = "none"
    """`add_columns`: new columns in a batch are added to the table (plus Iceberg's widenings)."""

    time_column: str | None = None
    """Column whose min and max go into each batch's result record; with `mode: replace_window`,
    the column of a row's time on which a derived step's window is replaced."""

    snapshot_retention_days: StrictInt | None = Field(7, ge=0)
    """The job expires the table's snapshots older than this many days (0: by count only), keeping
    at least `snapshot_retention_min`; null: turnstile never expires them."""

    snapshot_retention_min: StrictInt = Field(1000, ge=1)
    """Snapshots always kept by that expiry (more than the exactly-once check looks back at); it
    runs once the table holds a tenth more (at least 10 more) than this."""

    max_batches_per_job: StrictInt = Field(10, ge=1, le=100)
    """Ordered tables: how many consecutive backlog batches one job may apply (one commit each)."""

    max_bytes_per_job: StrictInt = Field(1 << 30, ge=1)
    """Ordered tables: a job stops taking further batches once their data files would pass this
    many bytes (the first batch always goes, whatever its size)."""

    job_retries: StrictInt = Field(3, ge=0, le=10)
    """How many times a job that failed for a transient reason (the service, the machine, a job
    that never started; not the batch's data or SQL) is retried, with exponential backoff."""

    job_retry_backoff_seconds: StrictInt = Field(60, ge=1, le=3600)
    """Wait before the first retry of a transient failure; each further retry waits twice as long
    (at most 15 minutes), plus a jitter."""

    job_timeout_seconds: StrictInt = Field(6 * 3600, ge=60)
    """A job still running after this long is cancelled by the sweeper's watchdog and counts as a
    transient failure."""

    mapping: field_mapping.Mapping = ()
    """Field mapping applied to each batch before transform.sql and the write, entry by entry in
    list order: rename/move, remove, cast, constant, default, a column from the path (see
    `turnstile.config.mapping`)."""

    expectations: tuple[row_expectations.Expectation, ...] = ()
    """Row-level checks run on each batch before its write: `[{"name": "positive_amount", "check":
    "amount >= 0", "on_fail": "warn" | "drop" | "fail"}]`; a row passes only when its check is TRUE
    (see `turnstile.config.expectations`)."""

    audits: tuple[batch_audits.Audit, ...] = ()
    """Queries returning offending rows, run on each batch's commit before it is published (ordered
    tables): `[{"name": "unique_id", "sql": "SELECT id FROM ${staged} GROUP BY id HAVING count(*) >
    1"}]`; a batch any of them returns rows for fails (see `turnstile.config.audits`)."""

    destination_regex: str | None = Field(None, alias="destinationRegex")
    """Overrides DESTINATION_REGEX for batches below this `_config/`."""

    natural_time: Literal["hourly", "daily"] | NaturalTimeRegex | None = None
    """How a batch's natural time (the period it holds) comes from its path: `"hourly"` or
    `"daily"` (the `YYYY/MM/DD/HH` or `YYYY/MM/DD` folders, or a `$YYYYMMDDHH` partition), or
    `{"regex": "(?P<time>[0-9]{10})", "format": "%Y%m%d%H", "period": "1h"}`. Gives the table a
    watermark (docs/PROTOCOL.md, Dependencies)."""

    depends_on: tuple[Annotated[_Dependency, BeforeValidator(dependency)], ...] = ()
    """Tables whose watermark a batch waits for: `["ds.a", {"table": "ds.b", "offset": "-1h"}]`. A
    batch whose period ends at E starts once each watermark reaches E + offset."""

    delay: Duration = "0m"
    """A batch whose period ends at E starts no earlier than E + delay (`"15m"`, `"1h"`)."""

    derived: DerivedSteps | None = None
    """A table with no files of its own: `{"step": "1h", "start": "2026-01-01T00:00:00Z",
    "maxstep": "6h"}`; its batches are time steps its transform.sql builds from `depends_on`."""

    gaps: GapsMode | None = None
    """`"wait"`: the watermark stops at the first missing period (until it is committed, skipped or
    marked missing); `"ignore"`: it follows the last commit. Unset: "wait" for a table other tables
    depend on."""

    max_gap_wait: Duration = DEFAULT_MAX_GAP_WAIT
    """A missing period older than this (since a later one was committed) raises the watermark_gap
    alert."""

    @cached_property
    def lineage(self) -> Lineage:
        """The lineage keys with every duration parsed."""
        return lineage(
            self.natural_time,
            self.depends_on,
            self.delay,
            self.derived,
            gaps=self.gaps,
            max_gap_wait=self.max_gap_wait,
        )

    @property
    def nested_unsaid(self) -> bool:
        """`nested` left unset on a format that is not nested by default: sub-folder files are
        neither read nor meant to be left out (`batchfiles.unread_sub_folders`)."""
        return self.nested is None and self.format not in NESTED_BY_DEFAULT

    @property
    def nested_folders(self) -> bool:
        """`nested` as set, else its default for the format: the columnar formats Spark writes
        partitioned are nested by default; text formats keep sub-folders as other batches."""
        return self.nested if self.nested is not None else self.format in NESTED_BY_DEFAULT

    @field_validator("schema_", "table_schema")
    @classmethod
    def _spark_ddl(cls, value: str | None) -> str | None:
        if value is not None:
            ddl.fields(value)  # ValueError naming the column and what is wrong with it
        return value

    @field_validator("expectations")
    @classmethod
    def _unique_expectations(
        cls, value: tuple[row_expectations.Expectation, ...]
    ) -> tuple[row_expectations.Expectation, ...]:
        return row_expectations.unique_names(value)

    @field_validator("audits")
    @classmethod
    def _unique_audits(cls, value: tuple[batch_audits.Audit, ...]) -> tuple[batch_audits.Audit, ...]:
        return batch_audits.unique_names(value)

    @field_validator("partition_by")
    @classmethod
    def _partition_transforms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            ddl.partition_transform(entry)
        return value

    @model_validator(mode="after")
    def _merge_needs_keys(self, info: ValidationInfo) -> LoadConfig:
        duplicates = field_mapping.duplicate_targets(self.mapping)
        if duplicates:
            raise ValueError("; ".join(duplicates))
        if info.context and info.context.get("partial"):
            return self  # one file of the cascade: cross-key rules apply to the merged result
        if self.mode == "merge" and not self.merge_keys:
            raise ValueError("mode 'merge' needs merge_keys (the columns that identify a row)")
        if self.mode != "merge" and (self.merge_order_by or self.delete_column):
            raise ValueError("merge_order_by and delete_column only apply to mode 'merge'")
        if self.derived is not None and not self.depends_on:
            raise ValueError("a derived table needs depends_on: the tables its steps are built from")
        if self.mode == "replace_window" and (problem := window_problem(self)):
            raise ValueError(problem)
        if self.jagged_rows and self.format != "csv":
            raise ValueError(f"jagged_rows only applies to format 'csv' (format is {self.format!r})")
        return self


def window_problem(load: LoadConfig) -> str | None:
    """Why `mode: replace_window` cannot replace a step's window: not a derived table, no
    `time_column`, or a `partition_by` that does not split rows at the step (Iceberg deletes the
    window by whole data files: one straddling it fails the commit)."""
    if load.derived is None:
        return (
            "mode 'replace_window' replaces a derived table's step window: set derived (a table of "
            "files: use overwrite_partitions or merge)"
        )
    column = load.time_column
    if not column:
        return "mode 'replace_window' needs time_column: the column of a row's time, which the window is on"
    fits = {f"hours({column})".lower()}
    if parse_duration(load.derived.step) % timedelta(days=1) == timedelta(0):
        fits.add(f"days({column})".lower())
    if not any(p.replace(" ", "").lower() in fits for p in load.partition_by):
        return (
            f"mode 'replace_window' needs partition_by with {' or '.join(sorted(fits))}: Iceberg replaces a "
            "step's window by whole data files, so the table's partitions must split rows at the step"
        )
    return None
