"""The SQL text the job runs, built by pure functions so it can be read and tested without Spark.

Identifiers that come from data (column names) are quoted with backticks, values from
configuration (table properties) are string literals; table names arrive already qualified
(`catalog.dataset.table`, each part an identifier) and are used as they are. transform.sql's
placeholders are filled as values by `turnstile.spark.placeholders`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from turnstile.core.errors import BatchFailed
from turnstile.names import legacy
from turnstile.spark import lexical, placeholders
from turnstile.spark.lexical import Kind

Column = tuple[str, str]  # (name, Spark simple type string such as "decimal(10,2)")

TRANSFORM_PLACEHOLDERS = ("table", "catalog", "dataset", "table_name", "rel", "generation")
"""What `${...}` a transform.sql may use (a derived table's step adds `spark.steps.WINDOW_PLACEHOLDERS`)."""

QUERY_KEYWORDS = frozenset({"SELECT", "FROM", "VALUES", "TABLE", "("})
DML_KEYWORDS = frozenset({"MERGE", "UPDATE", "DELETE", "INSERT"})
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[(),]")


def quote(name: str) -> str:
    """A column name as a Spark SQL identifier (a backtick inside is doubled)."""
    return lexical.quoted_name(name)


def create_namespace(catalog: str, dataset: str) -> str:
    return f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{dataset}"


def expire_snapshots(catalog: str, table: str, older_than: datetime, retain_last: int) -> str:
    """Iceberg's expire_snapshots procedure on `table` (catalog.dataset.table)."""
    name = lexical.string_literal(table.removeprefix(f"{catalog}."))
    stamp = older_than.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return (
        f"CALL {catalog}.system.expire_snapshots(table => {name}, "
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
        literal = lexical.string_literal
        props = ", ".join(f"{literal(key)}={literal(value)}" for key, value in properties.items())
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


def leading_keyword(sql: str) -> str | None:
    """The keyword a statement opens with, upper-cased, after its comments and, for `WITH name AS
    (...), ...`, after its common table expressions (`WITH x AS (...) INSERT ...` is an INSERT);
    `(` for a parenthesised query; None for no statement. Read without Spark (for `validate`); the
    job asks Spark's parser (`spark.statements`)."""
    tokens: list[str] = _TOKEN.findall(without_literals(sql))
    if not tokens:
        return None
    if tokens[0].upper() != "WITH":
        return tokens[0].upper()
    depth, closed = 0, False
    for token in tokens[1:]:
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
            closed = depth == 0
        elif depth == 0 and closed and token != "," and token.upper() != "AS":
            return token.upper()
        elif depth == 0 and token == ",":
            closed = False
    return None


def a_statement(keyword: str) -> str:
    """`a DROP statement`, `an INSERT statement`: for errors."""
    return f"{'an' if keyword[:1] in 'AEIOU' else 'a'} {keyword} statement"


def transform_problem(sql: str) -> str | None:
    """What makes transform.sql unable to run whatever its batch, as words that follow its name
    (`transform.sql must hold one statement...`): a literal or quoted name left open, the original
    tool's names, several statements. None when it has none of these."""
    statement = sql.strip().rstrip(";").strip()
    parts = lexical.segments(statement)
    for at, part in zip(_offsets(parts), parts, strict=True):
        if not part.closed and part.kind is not Kind.COMMENT:
            what = "quoted name" if part.kind is Kind.NAME else "literal"
            return (
                f"has a {what} opened with {part.opener} on line {lexical.line_of(statement, at)} "
                "and never closed; close it"
            )
    code = without_literals(statement)
    if (original := legacy.transform_names(code)) is not None:
        return f"cannot run: {original}"
    if ";" in code.strip().rstrip(";"):
        return (
            "must hold one statement (a SELECT over `batch`, or one "
            "MERGE/UPDATE/DELETE/INSERT); it holds several"
        )
    return None


def transform(sql: str, values: Mapping[str, placeholders.Value]) -> str:
    """transform.sql as one statement with its `${...}` placeholders filled as values where they
    stand (`spark.placeholders`); BatchFailed when it cannot run (`transform_problem`) or holds a
    placeholder `values` does not name or cannot be written where it stands."""
    statement = sql.strip().rstrip(";").strip()
    if (problem := transform_problem(statement)) is not None:
        raise BatchFailed(f"transform.sql {problem}")
    try:
        return placeholders.fill(statement, values)
    except placeholders.Unfilled as exc:
        raise BatchFailed(f"transform.sql {exc}") from exc


def without_literals(sql: str) -> str:
    """The SQL with string literals and quoted names emptied and comments blanked, so a `;`, a word
    or a `$` in any of them is not read as SQL."""
    emptied = {Kind.STRING: "''", Kind.RAW: "''", Kind.NAME: "``"}
    return "".join(
        " " + "\n" * part.text.count("\n") if part.kind is Kind.COMMENT else emptied.get(part.kind, part.text)
        for part in lexical.segments(sql)
    )


def _offsets(parts: Sequence[lexical.Segment]) -> list[int]:
    at, found = 0, []
    for part in parts:
        found.append(at)
        at += len(part.text)
    return found
