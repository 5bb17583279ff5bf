"""Schema changes between a table and an incoming batch, decided without Spark.

Columns are (name, Spark simple type string) pairs such as ("id", "int"), ("price", "decimal(10,2)").
Names compare case-insensitively, as Spark does by default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pyspark.sql.types import StructType

from turnstile.core.errors import BatchFailed
from turnstile.spark import sql

Column = sql.Column
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
# Iceberg's allowed type promotions (the table's type may be widened to the batch's).
_WIDENINGS = {("int", "bigint"), ("float", "double")}
# Spark types Iceberg has no counterpart for and stores as int (a table created from a batch with a
# smallint column has an int column): their values fit an int or bigint column as they are.
_SMALL_INTS = {"tinyint", "smallint"}


def widens(narrow: str, wide: str) -> bool:
    """True when Iceberg can promote a column of type `narrow` to `wide`."""
    if (narrow, wide) in _WIDENINGS:
        return True
    a, b = _DECIMAL.fullmatch(narrow), _DECIMAL.fullmatch(wide)
    return bool(a and b and a.group(2) == b.group(2) and int(b.group(1)) > int(a.group(1)))


@dataclass(frozen=True)
class Evolution:
    add: tuple[Column, ...] = ()  # new columns, added at the end of the table
    widen: tuple[Column, ...] = ()  # (column, new type)

    def statements(self, table: str) -> list[str]:
        return [sql.add_column(table, column) for column in self.add] + [
            sql.widen_column(table, column) for column in self.widen
        ]


EVOLVE_HINT = 'Set "schema_evolution": "add_columns" in load.json to add columns and widen types.'
CLASH_HINT = (
    "A type Iceberg cannot change to: fix the data, or read the column as the table's type (a "
    "`schema` in load.json, or a `cast` entry in its `mapping`)."
)


def plan(table: list[Column], batch: list[Column], *, evolve: bool, where: str) -> Evolution:
    """What must change for `batch` to be written to `table`; BatchFailed with a column-by-column
    diff when something cannot (or, without `evolve`, may not) change."""
    existing = {name.lower(): kind for name, kind in table}
    add, widen, problems, clashes = [], [], [], 0
    for name, kind in batch:
        current = existing.get(name.lower())
        if current is None:
            if kind == "void":
                problems.append(
                    f"  {name}: new column with no values (type unknown); give it a type in `schema`"
                )
            elif evolve:
                add.append((name, kind))
            else:
                problems.append(f"  {name}: new column ({kind}), not in the table")
        elif (
            current == kind
            or widens(kind, current)
            or kind == "void"
            or (kind in _SMALL_INTS and current in ("int", "bigint"))
        ):
            continue  # same type, or the batch's narrower values fit the table's column
        elif widens(current, kind):
            if evolve:
                widen.append((name, kind))
            else:
                problems.append(f"  {name}: table has {current}, batch has {kind} (a widening)")
        else:
            problems.append(f"  {name}: table has {current}, batch has {kind}: not a change Iceberg allows")
            clashes += 1
    if problems:
        hints = [EVOLVE_HINT] if len(problems) > clashes and not evolve else []
        hints += [CLASH_HINT] if clashes else []
        raise BatchFailed(f"the batch does not fit table {where}:\n" + "\n".join([*problems, *hints]))
    return Evolution(tuple(add), tuple(widen))


def fits_exactly(batch: StructType, target: StructType, keep: set[str]) -> bool:
    """The batch has the table's columns (names, types, order), then only `keep` columns: it is
    written as it is, where shaping it costs a round trip to the JVM per column."""
    fields = batch.fields
    head = [(x.name, x.dataType) for x in fields[: len(target.fields)]]
    tail = {x.name.lower() for x in fields[len(target.fields) :]}
    return head == [(x.name, x.dataType) for x in target.fields] and tail <= keep
