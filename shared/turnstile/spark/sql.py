"""The SQL text the job runs, built by pure functions so it can be read and tested without Spark.

Identifiers that come from data (column names) are quoted with backticks; table names arrive
already qualified (`catalog.dataset.table`) and are used as they are.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from string import Template

from turnstile.core.errors import BatchFailed
from turnstile.names import legacy

Column = tuple[str, str]  # (name, Spark simple type string such as "decimal(10,2)")

TRANSFORM_PLACEHOLDERS = ("table", "catalog", "dataset", "table_name", "rel", "generation")
"""What `${...}` a transform.sql may use (a derived table's step adds `spark.steps.WINDOW_PLACEHOLDERS`)."""

# Leading comments are skipped: a transform.sql that opens with `-- what it does` is still DML.
_DML = re.compile(
    r"^(?:\s|--[^\n]*(?:\n|$)|/\*.*?\*/)*(MERGE|UPDATE|DELETE|INSERT)\b", re.IGNORECASE | re.DOTALL
)


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (a backtick inside is doubled)."""
    return "`" + name.replace("`", "``") + "`"


def create_namespace(catalog: str, dataset: str) -> str:
    return f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{dataset}"


def expire_snapshots(catalog: str, table: str, older_than: datetime, retain_last: int) -> str:
    """Iceberg's expire_snapshots procedure on `table` (catalog.dataset.table)."""
    name = table.removeprefix(f"{catalog}.")
    stamp = older_than.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (
        f"CALL {catalog}.system.expire_snapshots(table => '{name}', "
        f"older_than => TIMESTAMP '{stamp}+00:00', retain_last => {retain_last})"
    )


def column_definitions(columns: Sequence[Column]) -> str:
    """`id` int, `name` string: the column list of a CREATE TABLE."""
    return ", ".join(f"{quote(name)} {kind}" for name, kind in columns)


HYGIENE_PROPERTIES = {
    # Each commit writes a new metadata.json (≈ 1 KB more per commit, the snapshot log grows);
    # without these every version stays in the table's metadata folder forever.
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "100",
}
"""Set on every table the job creates; `table_properties` in load.json overrides them."""


def table_properties(configured: Mapping[str, str]) -> dict[str, str]:
    """The properties of a new table: the hygiene defaults, then load.json's `table_properties`."""
    return HYGIENE_PROPERTIES | dict(configured)


def create_table(
    table: str,
    columns: str,
    *,
    partition_by: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
) -> str:
    """CREATE TABLE of an Iceberg table; `columns` is Spark DDL (`table_schema` or
    `column_definitions`), `partition_by` Iceberg transforms such as `days(ts)`."""
    clauses = ""
    if partition_by:
        clauses += f" PARTITIONED BY ({', '.join(partition_by)})"
    if properties:
        props = ", ".join(f"'{key}'='{value}'" for key, value in properties.items())
        clauses += f" TBLPROPERTIES ({props})"
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns}) USING iceberg{clauses}"


def add_column(table: str, column: Column) -> str:
    name, kind = column
    return f"ALTER TABLE {table} ADD COLUMN {quote(name)} {kind}"


def widen_column(table: str, column: Column) -> str:
    name, kind = column
    return f"ALTER TABLE {table} ALTER COLUMN {quote(name)} TYPE {kind}"


def merge_into(
    table: str, source: str, keys: Sequence[str], columns: Sequence[str], delete_column: str | None
) -> str:
    """MERGE INTO `table` from the view `source`: rows match when every key is equal (null-safe);
    with `delete_column`, a true value deletes the matched row and a new row is not inserted."""
    on = " AND ".join(f"t.{quote(k)} <=> s.{quote(k)}" for k in keys)
    sets = ", ".join(f"t.{quote(c)} = s.{quote(c)}" for c in columns)
    names = ", ".join(quote(c) for c in columns)
    values = ", ".join(f"s.{quote(c)}" for c in columns)
    deleted = f"coalesce(s.{quote(delete_column)}, false)" if delete_column else "false"
    clauses = f"WHEN MATCHED AND {deleted} THEN DELETE " if delete_column else ""
    clauses += f"WHEN MATCHED THEN UPDATE SET {sets} "
    clauses += f"WHEN NOT MATCHED AND NOT {deleted} THEN INSERT ({names}) VALUES ({values})"
    return f"MERGE INTO {table} t USING {source} s ON {on} {clauses}"


def is_dml(sql: str) -> bool:
    """True for a MERGE/UPDATE/DELETE/INSERT (it writes the table itself), False for a query."""
    return _DML.match(sql) is not None


def transform(sql: str, placeholders: Mapping[str, str]) -> str:
    """transform.sql as one statement with its `${...}` placeholders filled; BatchFailed when it
    holds several statements or a placeholder that `placeholders` does not name."""
    statement = sql.strip().rstrip(";").strip()
    if (original := legacy.transform_names(without_literals(statement))) is not None:
        raise BatchFailed(f"transform.sql cannot run: {original}")
    if ";" in without_literals(statement).strip().rstrip(";"):
        raise BatchFailed(
            "transform.sql must hold one statement (a SELECT over `batch`, or one "
            "MERGE/UPDATE/DELETE/INSERT); it holds several"
        )
    try:
        return Template(statement).substitute(placeholders)
    except (KeyError, ValueError) as exc:
        known = ", ".join(f"${{{name}}}" for name in placeholders)
        raise BatchFailed(f"transform.sql has an unknown placeholder {exc}; known: {known}") from exc


def without_literals(sql: str) -> str:
    """The SQL with string literals emptied and comments dropped (a `;` in either is no separator)."""
    return re.sub(
        r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/",
        lambda m: "''" if m.group().startswith("'") else " ",
        sql,
        flags=re.DOTALL,
    )
