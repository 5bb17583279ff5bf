"""The `_config/` cascade: load.json, transform.sql and ORDERME from the bucket root to a batch.

A `_config/` folder may sit at any level from the bucket root down to the batch folder:
- `load.json` files are deep-merged, NEARER levels overriding farther ones (objects merge key by
  key; any other value, lists included, is replaced whole);
- `transform.sql`: the nearest one wins;
- `ORDERME`: anywhere on the path orders the batch. Only `_SUCCESS` events consult it: once a
  pointer is in `_backlog/`, the backlog itself is the record that the table is ordered, so
  `_backlog` and `_BACKFILL` events never depend on where ORDERME sits.

Cost of one lookup (documented in docs/CONFIGURATION.md): one listing per level that has not been
seen in this invocation, plus one read per `load.json` and `transform.sql` found. Nothing is cached
across invocations: each invocation builds its own `ConfigReader`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from turnstile.errors import ConfigError
from turnstile.paths import CONFIG
from turnstile.store.port import ObjectStore
from turnstile.validation import explain

LOAD_JSON = "load.json"
TRANSFORM_SQL = "transform.sql"
ORDERME = "ORDERME"


class LoadConfig(BaseModel):
    """How to read a batch and write it to its Iceberg table (the merged `load.json`)."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True
    )

    format: Literal["csv", "json", "jsonl", "parquet", "orc", "text"] = "csv"
    """File format of the data files (`json` and `jsonl` both mean one JSON object per line).
    Gzip-compressed files (`.gz`) are read transparently."""

    reader_options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    """Spark DataFrameReader options, e.g. `{"delimiter": ";"}`; CSV defaults to `header: true`."""

    schema_: str | None = Field(None, alias="schema")
    """Explicit schema as Spark DDL (`id BIGINT, name STRING, ts TIMESTAMP`); default: inferred."""

    mode: Literal["append", "merge", "overwrite"] = "append"
    """append rows; merge (MERGE INTO on `merge_keys`); overwrite (replace the table atomically)."""

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

    max_bad_records: int = Field(0, ge=0)
    """Rows that fail to parse or cast and may be set aside in `_failed/` before the batch fails."""

    schema_evolution: Literal["none", "add_columns"] = "none"
    """`add_columns`: new columns in a batch are added to the table (plus Iceberg's widenings)."""

    time_column: str | None = None
    """Column whose min and max go into each batch's result record."""

    max_batches_per_job: int = Field(10, ge=1, le=100)
    """Ordered tables: how many consecutive backlog batches one job may apply (one commit each)."""

    job_retries: int = Field(3, ge=0, le=10)
    """How many times a job that failed for a transient reason (the service, the machine, a job
    that never started; not the batch's data or SQL) is retried, with exponential backoff."""

    job_retry_backoff_seconds: int = Field(60, ge=1, le=3600)
    """Wait before the first retry of a transient failure; each further retry waits twice as long
    (at most 15 minutes), plus a jitter."""

    job_timeout_seconds: int = Field(6 * 3600, ge=60)
    """A job still running after this long is cancelled by the sweeper's watchdog and counts as a
    transient failure."""

    destination_regex: str | None = Field(None, alias="destinationRegex")
    """Overrides DESTINATION_REGEX for batches below this `_config/`."""

    @model_validator(mode="after")
    def _merge_needs_keys(self, info: ValidationInfo) -> LoadConfig:
        if info.context and info.context.get("partial"):
            return self  # one file of the cascade: cross-key rules apply to the merged result
        if self.mode == "merge" and not self.merge_keys:
            raise ValueError("mode 'merge' needs merge_keys (the columns that identify a row)")
        if self.mode != "merge" and (self.merge_order_by or self.delete_column):
            raise ValueError("merge_order_by and delete_column only apply to mode 'merge'")
        return self


@dataclass(frozen=True)
class ResolvedConfig:
    """Everything the cascade decided for one batch folder."""

    load: LoadConfig
    transform_sql: str | None
    ordered: bool
    sources: tuple[str, ...]  # the config objects that contributed, farthest first

    @property
    def digest(self) -> str:
        """A stable hash of what the job will do, stamped on every Iceberg commit."""
        payload = json.dumps(
            {"load": self.load.model_dump(mode="json", by_alias=True), "transform": self.transform_sql},
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def deep_merge(far: dict[str, Any], near: dict[str, Any]) -> dict[str, Any]:
    """`near` overrides `far`; nested objects merge key by key."""
    merged = dict(far)
    for key, value in near.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def levels(folder: str) -> list[str]:
    """The folders from the bucket root ("") down to `folder`, each with a trailing slash."""
    parts = [p for p in folder.split("/") if p]
    return [""] + ["/".join(parts[: i + 1]) + "/" for i in range(len(parts))]


@dataclass
class _Level:
    load: dict[str, Any] | None = None
    transform_sql: str | None = None
    orderme: bool = False
    sources: list[str] = field(default_factory=list)
    error: ConfigError | None = None  # its load.json is broken: `resolve` raises it
    may_move_tables: bool = False  # its load.json mentions destinationRegex (read or not)


class ConfigReader:
    """Reads `_config/` folders for one invocation; each folder is read at most once."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._levels: dict[str, _Level] = {}

    def _level(self, level: str) -> _Level:
        if level not in self._levels:
            self._levels[level] = self._read_level(level)
        return self._levels[level]

    def _read_level(self, level: str) -> _Level:
        found = _Level()
        folder = f"{level}{CONFIG}/"
        for info in self._store.list_objects(folder):
            base = info.name[len(folder) :]  # `_config/old/load.json` is not this level's load.json
            if base == ORDERME:
                found.orderme = True
                found.sources.append(info.name)
            elif base in (LOAD_JSON, TRANSFORM_SQL):
                obj = self._store.read(info.name)
                if obj is None:  # deleted between list and read: as if never there
                    continue
                found.sources.append(info.name)
                if base == LOAD_JSON:
                    found.may_move_tables = (
                        b"destinationRegex" in obj.data or b"destination_regex" in obj.data
                    )
                    try:
                        found.load = _parse_load_json(self._store.bucket, info.name, obj.data)
                    except ConfigError as exc:
                        found.error = exc
                else:
                    found.transform_sql = obj.text()
        return found

    def resolve(self, folder: str) -> ResolvedConfig:
        """The merged config for a batch folder (path relative to the bucket)."""
        merged: dict[str, Any] = {}
        transform: str | None = None
        ordered = False
        sources: list[str] = []
        for level in levels(folder):
            found = self._level(level)
            if found.error is not None:
                raise found.error
            if found.load is not None:
                merged = deep_merge(merged, found.load)
            transform = found.transform_sql if found.transform_sql is not None else transform
            ordered = ordered or found.orderme
            sources.extend(found.sources)
        where = ", ".join(f"gs://{self._store.bucket}/{s}" for s in sources if s.endswith(LOAD_JSON))
        try:
            load = LoadConfig.model_validate(merged)
        except ValidationError as exc:
            raise ConfigError(
                f"the merged load.json for gs://{self._store.bucket}/{folder} (from {where or 'defaults'}) "
                f"is invalid: {'; '.join(explain(exc))}"
            ) from exc
        return ResolvedConfig(load, transform, ordered, tuple(sources))

    def certainly_ordered(self, folder: str, *, everywhere: bool) -> bool:
        """For a folder whose config does not validate: True when it is ordered all the same
        (`everywhere`, or an ORDERME on its path) and no load.json on its path can move it to
        another table (none mentions destinationRegex): its batch can then be queued, to block its
        table until the config is fixed."""
        found = [self._level(level) for level in levels(folder)]
        ordered = everywhere or any(f.orderme for f in found)
        return ordered and not any(f.may_move_tables for f in found)


def _parse_load_json(bucket: str, name: str, data: bytes) -> dict[str, Any]:
    where = f"gs://{bucket}/{name}"
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} is not valid JSON ({exc}); fix or delete it") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"{where} must hold a JSON object, found {type(document).__name__}")
    # Validate each file alone (every key has a default) so the error names the file at fault.
    try:
        LoadConfig.model_validate(document, context={"partial": True})
    except ValidationError as exc:
        problems = explain(exc)
        allowed = ", ".join(sorted(str(f.alias or n) for n, f in LoadConfig.model_fields.items()))
        hint = f" (known keys: {allowed})" if any("not a known key" in p for p in problems) else ""
        raise ConfigError(f"{where}: {'; '.join(problems)}{hint}") from exc
    # One spelling per key (`schema_` -> `schema`), so a nearer file overrides a farther one
    # whichever of the two spellings each uses.
    return {_ALIASES.get(key) or key: value for key, value in document.items()}


_ALIASES: dict[str, str] = {name: str(f.alias) for name, f in LoadConfig.model_fields.items() if f.alias}
