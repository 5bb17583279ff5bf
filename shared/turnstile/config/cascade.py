"""The `_config/` cascade: load.json, transform.sql and ORDERME from the bucket root to a batch.

A `_config/` folder may sit at any level from the bucket root down to the batch folder:
- `load.json` files are deep-merged, NEARER levels overriding farther ones (objects merge key by
  key; any other value, lists included, is replaced whole);
- `transform.sql`: the nearest one wins; `bq_transform.sql` (the name gcs_ocn_bq_ingest used) is
  read as the same file, and a level holding both is an error naming both;
- `audit.sql`: the nearest one wins (`turnstile.config.audits`);
- `ORDERME`: anywhere on the path orders the batch. Only `_SUCCESS` events consult it: once a
  pointer is in `_backlog/`, the backlog itself is the record that the table is ordered, so
  `_backlog` and `_BACKFILL` events never depend on where ORDERME sits.

Cost of one lookup (documented in docs/CONFIGURATION.md): one listing per level that has not been
seen in this invocation, plus one read per `load.json` and `transform.sql` found. Each invocation
builds its own `ConfigReader`; given the function instance's `ConfigCache` view, a level read by an
earlier invocation costs nothing until the cache forgets it (`turnstile.config.config_cache`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from turnstile.config.config_cache import CachedLevels
from turnstile.config.load_config import LoadConfig
from turnstile.config.validation import explain
from turnstile.core.errors import ConfigError
from turnstile.names.paths import CONFIG
from turnstile.store.port import ObjectStore, object_uri

LOAD_JSON = "load.json"
TRANSFORM_SQL = "transform.sql"
BQ_TRANSFORM_SQL = "bq_transform.sql"  # gcs_ocn_bq_ingest's name: an alias of TRANSFORM_SQL
AUDIT_SQL = "audit.sql"  # queries run on a batch's staged commit before its publish
ORDERME = "ORDERME"
EXTERNAL_JSON = "external.json"  # the original loader's definition of its external table
ORDERED_KINDS = ("incremental", "historical")  # the folders of the default layout that may hold ORDERME


@dataclass(frozen=True)
class ResolvedConfig:
    """Everything the cascade decided for one batch folder."""

    load: LoadConfig
    transform_sql: str | None
    ordered: bool
    sources: tuple[str, ...]  # the config objects that contributed, farthest first
    mapping_source: str | None = None  # the load.json whose `mapping` is in force (lists replace whole)
    audit_sql: str | None = None  # the nearest audit.sql's text

    @property
    def audit_source(self) -> str | None:
        """The object name of the audit.sql in force (the nearest one), None without one."""
        found = [s for s in self.sources if s.rpartition("/")[2] == AUDIT_SQL]
        return found[-1] if found and self.audit_sql is not None else None

    @property
    def transform_source(self) -> str | None:
        """The object name of the transform.sql in force (the nearest one), None without one."""
        found = [s for s in self.sources if s.rpartition("/")[2] in (TRANSFORM_SQL, BQ_TRANSFORM_SQL)]
        return found[-1] if found and self.transform_sql is not None else None

    @property
    def digest(self) -> str:
        """A stable hash of what the job will do, stamped on every Iceberg commit."""
        document = {"load": self.load.model_dump(mode="json", by_alias=True), "transform": self.transform_sql}
        if self.audit_sql is not None:  # without one, the digest stays what it was before audits
            document["audit"] = self.audit_sql
        payload = json.dumps(document, sort_keys=True)
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
    audit_sql: str | None = None
    orderme: bool = False
    sources: list[str] = field(default_factory=list)
    error: ConfigError | None = None  # its load.json is broken: `resolve` raises it
    may_move_tables: bool = False  # its load.json mentions destinationRegex (read or not)
    generations: dict[str, int] = field(default_factory=dict)  # every object listed -> generation


class ConfigReader:
    """Reads `_config/` folders for one invocation; each folder is read at most once."""

    def __init__(self, store: ObjectStore, cached: CachedLevels | None = None) -> None:
        self._store = store
        self._levels: dict[str, _Level] = {}
        self._cached = cached

    def reading_through(self, store: ObjectStore, fresh: str) -> ConfigReader:
        """A reader of the same bucket through `store` (a listed view of it) that shares this
        one's levels, a level either reads being read once for both; but those whose `_config/`
        folder is under `fresh` (what `store` lists) are read again, through it."""
        for level in list(self._levels):  # a copy: other threads may add levels meanwhile
            if f"{level}{CONFIG}/".startswith(fresh):
                self._levels.pop(level, None)
        other = ConfigReader(store, self._cached)
        other._levels = self._levels
        return other

    def _level(self, level: str) -> _Level:
        if level not in self._levels:
            found = self._cached.get(level) if self._cached else None
            if not isinstance(found, _Level):
                found = self._read_level(level)
                if self._cached:
                    self._cached.put(level, found, found.generations)
            self._levels[level] = found
        return self._levels[level]

    def _read_level(self, level: str) -> _Level:
        found = _Level()
        folder = f"{level}{CONFIG}/"
        for info in self._store.list_entries(folder):
            base = info.name[len(folder) :]  # `_config/old/load.json` is not this level's load.json
            if info.generation is not None:  # not on S3: its `_config/` events always refresh the level
                found.generations[info.name] = info.generation
            if base == ORDERME:
                found.orderme = True
                found.sources.append(info.name)
            elif (refused := refused_config_file(base)) is not None:
                found.sources.append(info.name)
                found.error = ConfigError(f"{object_uri(self._store, info.name)}: {refused}")
            elif base == AUDIT_SQL:
                obj = self._store.read(info.name)
                if obj is not None:  # deleted between list and read: as if never there
                    found.sources.append(info.name)
                    found.audit_sql = obj.text()
            elif base in (LOAD_JSON, TRANSFORM_SQL, BQ_TRANSFORM_SQL):
                obj = self._store.read(info.name)
                if obj is None:  # deleted between list and read: as if never there
                    continue
                found.sources.append(info.name)
                if base == LOAD_JSON:
                    found.may_move_tables = (
                        b"destinationRegex" in obj.data or b"destination_regex" in obj.data
                    )
                    try:
                        found.load = _parse_load_json(object_uri(self._store, info.name), obj.data)
                    except ConfigError as exc:
                        found.error = exc
                elif found.transform_sql is not None:
                    found.error = ConfigError(
                        f"{object_uri(self._store, folder)} holds both {TRANSFORM_SQL} and "
                        f"{BQ_TRANSFORM_SQL} (an alias of the same file); keep one and delete the other"
                    )
                else:
                    found.transform_sql = obj.text()
        return found

    def resolve(self, folder: str, *, partial: bool = False) -> ResolvedConfig:
        """The merged config for a batch folder (path relative to the bucket). `partial`: for a
        folder above the batches (a table's), whose keys nearer files may still complete, the rules
        across keys are not applied."""
        merged: dict[str, Any] = {}
        transform: str | None = None
        audit: str | None = None
        ordered = False
        sources: list[str] = []
        mapping_source: str | None = None
        for level in levels(folder):
            found = self._level(level)
            if found.error is not None:
                raise found.error
            if found.load is not None:
                merged = deep_merge(merged, found.load)
                if "mapping" in found.load:
                    mapping_source = f"{level}{CONFIG}/{LOAD_JSON}"
            transform = found.transform_sql if found.transform_sql is not None else transform
            audit = found.audit_sql if found.audit_sql is not None else audit
            ordered = ordered or found.orderme
            sources.extend(found.sources)
        where = ", ".join(object_uri(self._store, s) for s in sources if s.endswith(LOAD_JSON))
        try:
            load = LoadConfig.model_validate(merged, context={"partial": True} if partial else None)
        except ValidationError as exc:
            raise ConfigError(
                f"the merged load.json for {object_uri(self._store, folder)} (from {where or 'defaults'}) "
                f"is invalid: {'; '.join(explain(exc))}"
            ) from exc
        return ResolvedConfig(load, transform, ordered, tuple(sources), mapping_source, audit)

    def known_empty(self, level: str) -> None:
        """A listing made for another purpose showed nothing in the level's `_config/`: take it as
        empty without listing it (a batch folder's level is new for every batch, so listing it
        would cost one operation per batch)."""
        self._levels.setdefault(level, _Level())

    def orders_below(self, table_prefix: str) -> bool:
        """An ORDERME in the `_config/` of one of the default layout's kind folders of the table
        (`incremental/`: its historical batches stay unordered)."""
        return any(self._level(f"{table_prefix}/{kind}/").orderme for kind in ORDERED_KINDS)

    def certainly_ordered(self, folder: str, *, everywhere: bool) -> bool:
        """For a folder whose config does not validate: True when it is ordered all the same
        (`everywhere`, or an ORDERME on its path) and no load.json on its path can move it to
        another table (none mentions destinationRegex): its batch can then be queued, to block its
        table until the config is fixed."""
        ordered = everywhere or any(self._level(level).orderme for level in levels(folder))
        return ordered and self.keeps_table(folder)

    def keeps_table(self, folder: str) -> bool:
        """For a folder whose config does not validate: True when no load.json on its path can move
        its batches to another table (none mentions destinationRegex), so the layout names it."""
        return not any(self._level(level).may_move_tables for level in levels(folder))


def refused_config_file(base: str) -> str | None:
    """Why a `_config/` file the original loader read is refused rather than ignored (ignoring it
    would change what a batch writes without a word); None for any other name."""
    if base == EXTERNAL_JSON:
        return (
            "turnstile does not read external.json: move its settings (format, reader options, schema) "
            "into load.json, then delete it"
        )
    if base.endswith(".sql") and "/" not in base and base not in (TRANSFORM_SQL, BQ_TRANSFORM_SQL, AUDIT_SQL):
        return (
            f"only {TRANSFORM_SQL} (or its alias {BQ_TRANSFORM_SQL}) is read as the transform and "
            f"{AUDIT_SQL} as the audits: rename this file to transform.sql (Spark SQL over the view "
            "`batch`) or audit.sql (SELECTs returning offending rows), or delete it"
        )
    return None


def _parse_load_json(where: str, data: bytes) -> dict[str, Any]:
    """The keys of the load.json at URI `where`, each spelt one way; ConfigError names `where`."""
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
