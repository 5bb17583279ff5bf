"""`turnstile validate` on a batch's `mapping`: its entries played over the fields the batch has.

The batch's fields come from `schema` in load.json when it is set, else from a sample of its
first data file (the CSV header, or the first JSON lines; other formats are not sampled). Then
the `from_path` entries are tried on the batch's path, and, when load.json gives `table_schema`
(and no transform.sql reshapes the rows), the mapped columns are checked against it. A CSV batch
with a `schema` has its header checked against it too, as the job checks it.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import zlib

from turnstile.config.ddl import Fields
from turnstile.config.ddl import fields as ddl_fields
from turnstile.config.load_config import LoadConfig
from turnstile.config.mapping import FromPath
from turnstile.config.mapping_fields import path_value, play, sample_fields
from turnstile.names.batchfiles import data_files
from turnstile.names.paths import Batch
from turnstile.store.port import ObjectStore, object_uri

SAMPLE_LINES = 100
SAMPLE_MAX_BYTES = 64 << 20  # a larger first file is not read whole for a sample


def problems(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    names: list[str],
    sizes: dict[str, int],
    *,
    transform_sql: str | None,
    success_filename: str,
) -> list[str]:
    """What is wrong with the mapping for this batch (empty when nothing is, or it has none)."""
    if not load.mapping:
        return []
    found: list[str] = []
    fields, source = _batch_fields(store, batch, load, (names, sizes), success_filename)
    if fields is not None:
        after, wrong = play(fields, load.mapping)
        found += [f"{problem} (the batch's fields from {source})" for problem in wrong]
        found += _against_table(after, load, transform_sql)
        found += _keys_mapped_away(after, load, transform_sql)
    for index, entry in enumerate(load.mapping):
        if isinstance(entry, FromPath):
            try:
                path_value(index, entry, batch.rel, batch.natural_time)
            except ValueError as exc:
                found.append(str(exc))
    return found


def _batch_fields(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    listing: tuple[list[str], dict[str, int]],
    success_filename: str,
) -> tuple[Fields | None, str]:
    if load.schema_ is not None:
        try:
            return ddl_fields(load.schema_), "`schema` in load.json"
        except ValueError:
            return None, ""  # Spark is the judge of DDL this reader cannot follow
    if load.format not in ("csv", "json", "jsonl"):
        return None, ""
    sample = _sample(store, batch, load, listing, success_filename)
    if sample is None:
        return None, ""
    name, text = sample
    fields = _csv_fields(text, load) if load.format == "csv" else _json_fields(text)
    if fields is not None and load.nested_folders:
        fields |= _partition_columns(name.removeprefix(batch.folder))
    return fields, f"a sample of {object_uri(store, name)}"


def batch_fields(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    listing: tuple[list[str], dict[str, int]],
    success_filename: str,
) -> Fields | None:
    """The batch's fields before its mapping, from `schema` or a sample (None when unknown)."""
    return _batch_fields(store, batch, load, listing, success_filename)[0]


def header_problems(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    listing: tuple[list[str], dict[str, int]],
    success_filename: str,
) -> list[str]:
    """A CSV header that does not name `schema`'s columns in order: the job would fail the batch
    (reading.py), so it is said before the batch is applied."""
    options = {k.lower(): str(v).lower() for k, v in load.reader_options.items()}
    if load.format != "csv" or load.schema_ is None:
        return []
    if options.get("header", "true") == "false" or options.get("enforceschema") == "true":
        return []
    try:
        expected = list(ddl_fields(load.schema_))
    except ValueError:
        return []
    sample = _sample(store, batch, load, listing, success_filename)
    header = list(_csv_fields(sample[1], load) or {}) if sample else []
    if not sample or [n.lower() for n in header] == [n.lower() for n in expected]:
        return []
    return [
        f"the header of {object_uri(store, sample[0])} names {', '.join(header)} where `schema` in "
        f"load.json has {', '.join(expected)}: the batch would fail; fix the header or the schema, or "
        "set reader_options.enforceSchema to true to map columns by position"
    ]


def _sample(
    store: ObjectStore,
    batch: Batch,
    load: LoadConfig,
    listing: tuple[list[str], dict[str, int]],
    success_filename: str,
) -> tuple[str, str] | None:
    """The name and text of the batch's first data file, when it is small enough to read whole."""
    names, sizes = listing
    below = [n for n in names if n.startswith(batch.folder)]
    files = data_files(batch.folder, below, nested=load.nested_folders, success_filename=success_filename)
    if not files or sizes.get(files[0], 0) > SAMPLE_MAX_BYTES:
        return None
    stored = store.read(files[0])
    text = None if stored is None else _text(stored.data, gzipped=files[0].endswith(".gz"))
    return None if text is None else (files[0], text)


def _partition_columns(below: str) -> Fields:
    """The `key=value` folders between the batch folder and a file: columns Spark adds to its rows."""
    folders = below.split("/")[:-1]
    return {folder.partition("=")[0]: None for folder in folders if "=" in folder}


def _text(data: bytes, *, gzipped: bool) -> str | None:
    try:
        raw = gzip.decompress(data) if gzipped else data
        return raw.decode("utf-8", errors="replace")
    except (OSError, EOFError, zlib.error):
        return None


def _csv_fields(text: str, load: LoadConfig) -> Fields | None:
    options = {k.lower(): v for k, v in load.reader_options.items()}
    delimiter = str(options.get("sep", options.get("delimiter", ",")))
    first = next(csv.reader(io.StringIO(text.split("\n", 1)[0]), delimiter=delimiter[:1] or ","), None)
    if first is None:
        return None
    if str(options.get("header", "true")).lower() == "false":
        return {f"_c{i}": None for i in range(len(first))}  # Spark's names for headerless columns
    return {name: None for name in first}


def _json_fields(text: str) -> Fields | None:
    fields: Fields = {}
    for line in text.splitlines()[:SAMPLE_LINES]:
        try:
            found = sample_fields(json.loads(line)) if line.strip() else None
        except json.JSONDecodeError:
            continue  # a bad row; the job sets it aside
        if found is not None:
            fields = _union(fields, found)
    return fields or None


def _union(a: Fields, b: Fields) -> Fields:
    merged = dict(a)
    for name, below in b.items():
        here = merged.get(name)
        merged[name] = _union(here, below) if here is not None and below is not None else (here or below)
    return merged


def _against_table(after: Fields, load: LoadConfig, transform_sql: str | None) -> list[str]:
    """Mapped columns the table (as `table_schema` gives it) does not have and may not gain."""
    if load.table_schema is None or transform_sql is not None or load.schema_evolution == "add_columns":
        return []
    try:
        table = {name.lower() for name in ddl_fields(load.table_schema)}
    except ValueError:
        return []
    extra = [name for name in after if name.lower() not in table]
    if not extra:
        return []
    return [
        f"the mapped batch has column(s) {', '.join(map(repr, extra))} that table_schema does not; "
        'add them to table_schema, remove them in the mapping, or set "schema_evolution": "add_columns"'
    ]


def _keys_mapped_away(after: Fields, load: LoadConfig, transform_sql: str | None) -> list[str]:
    """`merge_keys` and `time_column` name columns of the mapped rows (without a transform.sql,
    which may make them): one the mapping renamed or removed fails every batch at run time."""
    if transform_sql is not None:
        return []
    have = {name.lower() for name in after}
    named = [("merge_keys", key) for key in load.merge_keys]
    if load.time_column is not None:
        named.append(("time_column", load.time_column))
    return [
        f"{key} names {column!r}, which the mapped batch does not have (the mapping renames or removes "
        f"it; the mapped columns are {', '.join(map(repr, after))}): name the mapped column instead"
        for key, column in named
        if column.lower() not in have
    ]
