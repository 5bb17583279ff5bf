"""`turnstile validate`, dependencies: each `depends_on` names a table that exists in the bucket,
and no table waits, through its dependencies, for itself.

A table's dependencies are those of the config cascade at its folder (`_config/load.json` at the
table or above), as the protocol reads them; the check follows them across the whole bucket.
"""

from __future__ import annotations

import json

from turnstile.config.cascade import LOAD_JSON, ConfigReader
from turnstile.config.lineage_config import Edge
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.naturaltime import NaturalTime
from turnstile.names.paths import CONFIG, parse_success
from turnstile.ops.explain import period_of
from turnstile.protocol import cycles
from turnstile.protocol.lineage import holds_more_than_waits
from turnstile.spark import sql
from turnstile.store.port import ObjectStore


def dependency_problems(
    store: ObjectStore,
    configs: ConfigReader,
    load_jsons: list[str],
    tables: set[str],
    *,
    order_per_table: bool,
) -> list[tuple[str, str]]:
    """(load.json, problem) for each load.json that declares `depends_on` or `delay` for a table
    that could never honour it: not ordered, waiting for itself or for a table that is not in the
    bucket or has no watermark, or closing a dependency cycle. A load.json above the tables (a
    dataset's, the bucket's) is checked for each table of `tables` below it."""
    found: list[tuple[str, str]] = []
    for name in load_jsons:
        if not _declares_waits(store, name):
            continue
        folder = name.removesuffix(f"{CONFIG}/{LOAD_JSON}").rstrip("/")
        for table in _governed(folder, tables):
            for problem in _table_problems(store, configs, table, order_per_table):
                if (name, problem) not in found:
                    found.append((name, problem))
    return found


def _governed(folder: str, tables: set[str]) -> list[str]:
    """The tables a load.json in `folder`'s `_config/` applies to: the folder itself when it is a
    table (or no batch shows any table below it yet), else the tables below it."""
    below = sorted(t for t in tables if not folder or t == folder or t.startswith(f"{folder}/"))
    return below or ([folder] if folder else [])


def _table_problems(
    store: ObjectStore, configs: ConfigReader, table: str, order_per_table: bool
) -> list[str]:
    try:
        resolved = configs.resolve(f"{table}/", partial=True)
    except ConfigError:
        return []  # its own problem is reported with the file
    lineage = resolved.load.lineage
    problems = []
    ordered = resolved.ordered or order_per_table or lineage.derived or configs.orders_below(table)
    if lineage.gated and not ordered:
        problems.append(
            f"table {table!r} is not ordered (no ORDERME on its path), and only ordered tables wait: "
            "its batches would be recorded as failed; put an ORDERME in its _config/ or remove "
            "depends_on and delay"
        )
    for edge in lineage.depends_on:
        if edge.prefix == table:
            problems.append(
                f"depends_on: table {table!r} would wait for itself for ever (a depends_on in a dataset's "
                "or the bucket's _config/load.json applies to every table below it); move it to the "
                "dependent tables' own _config/load.json"
            )
        elif problem := _source_problem(store, configs, edge, order_per_table):
            problems.append(f"depends_on: table {edge.prefix!r} {problem}")
    if lineage.derived:
        problems += _derived_problems(table, resolved.transform_sql)
    cycle = [] if any(e.prefix == table for e in lineage.depends_on) else cycles.cycle_through(configs, table)
    if cycle:
        problems.append(f"depends_on: {cycles.describe(cycle)}")
    return problems


def _derived_problems(table: str, transform_sql: str | None) -> list[str]:
    """What makes every step of a derived table fail: no transform.sql, or one that opens as
    something else than a query (the job asks Spark's parser; this reads the first keyword)."""
    if transform_sql is None:
        return [
            f"derived table {table!r} has no transform.sql: every step would fail; upload "
            f"{table}/{CONFIG}/transform.sql, a SELECT over the source tables for the rows between "
            "${window_start} and ${window_end}"
        ]
    keyword = sql.leading_keyword(transform_sql)
    if keyword is not None and keyword not in sql.QUERY_KEYWORDS:
        return [
            f"derived table {table!r}: its transform.sql is {sql.a_statement(keyword)}, not a SELECT; a "
            "derived table's transform.sql is a SELECT of the step's rows, written in the table's "
            "mode: rewrite it as that SELECT"
        ]
    return []


def natural_time_warning(configs: ConfigReader, bucket: str, name: str, regex: str | None) -> str | None:
    """A batch of a table with `natural_time` whose path names no period (an hourly natural time
    over daily folders, say): it would neither wait for its dependencies nor move the watermark."""
    folder = name.rpartition("/")[0] + "/"
    try:
        resolved = configs.resolve(folder)
        batch = parse_success(bucket, name, resolved.load.destination_regex or regex)
        natural_time = configs.resolve(batch.table.batch_folder(""), partial=True).load.lineage.natural_time
        if natural_time is None:
            return None
        if natural_time.start(batch.rel) is not None:
            return _finer_warning(natural_time, batch.rel)
    except (ConfigError, PathError, ValueError):
        return None  # reported as a problem of the batch or of its load.json
    return (
        f"its path {batch.rel!r} names no period for the table's natural_time: it neither waits for "
        "the table's dependencies nor moves its watermark; fix the folder or natural_time"
    )


def _finer_warning(natural_time: NaturalTime, rel: str) -> str | None:
    """A batch below the period it names holds part of it: the watermark waits for the next period."""
    if not natural_time.finer(rel):
        return None
    return (
        f"its path {rel!r} is finer than the table's natural_time (it goes on below the period "
        f"{period_of(natural_time, rel)}): it moves the watermark only to the period's start, and "
        "dependents build the period once a batch of a later period commits; to make each batch a "
        "period of its own, give natural_time a regex and period that match its folders"
    )


def _source_problem(
    store: ObjectStore, configs: ConfigReader, edge: Edge, order_per_table: bool
) -> str | None:
    if not holds_more_than_waits(store, edge.prefix):
        return (
            "has no objects in the bucket (no batches, no _config/); a name is `dataset.table` for "
            "the folder `dataset/table`: fix the name or create the table's _config/ first"
        )
    try:
        resolved = configs.resolve(f"{edge.prefix}/", partial=True)
    except ConfigError:
        return None  # its own load.json is reported with that file
    source = resolved.load.lineage
    if source.natural_time is None:
        return (
            "has no natural_time, so it has no watermark and this table would wait forever: set "
            '"natural_time" in its _config/load.json'
        )
    if not (resolved.ordered or order_per_table or source.derived or configs.orders_below(edge.prefix)):
        return (
            "is not ordered (no ORDERME on its path), so it has no watermark and this table would wait "
            "forever: put an ORDERME in its _config/"
        )
    return None


def _declares_waits(store: ObjectStore, name: str) -> bool:
    found = store.read(name)
    if found is None:
        return False
    try:
        document = json.loads(found.data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(document, dict) and bool(document.get("depends_on") or document.get("delay"))
