"""Commands on the local stack: up, down, and query on its Iceberg warehouse."""

from __future__ import annotations

from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, emit_json
from turnstile.local.commands import down, up
from turnstile.ops import query as query_ops
from turnstile.ops import render

__all__ = ["down", "query_command", "up"]


@guarded
def query_command(
    sql: Annotated[str, typer.Argument(metavar='"SQL"', help="one Spark SQL statement")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="print at most this many rows")] = 1000,
    output: OutputOption = Output.text,
) -> None:
    """Run Spark SQL on the local stack's Iceberg warehouse (tables are `<catalog>.<ds>.<table>`,
    the catalog is the default one) and print the rows."""
    target = _target.current()
    stack, warehouse = query_ops.locate(target.stack, target.home)
    found = query_ops.run(stack, warehouse, sql, limit)
    if output is Output.json:
        keys = _unique(found.columns)
        emit_json(
            {
                "columns": list(found.columns),
                "rows": [dict(zip(keys, row, strict=True)) for row in found.rows],
                "truncated": found.truncated,
            }
        )
        return
    out = render.console()
    if found.columns:
        render.show(out, render.table(found.columns, found.rows, null="NULL", precise=True))
    shown = f"{len(found.rows)} rows"
    out.print(f"{shown}, more not shown (--limit)" if found.truncated else shown)


def _unique(columns: tuple[str, ...]) -> list[str]:
    """JSON object keys for the columns: a repeated name gets `_2`, `_3`..."""
    seen: dict[str, int] = {}
    keys = []
    for column in columns:
        seen[column] = seen.get(column, 0) + 1
        keys.append(column if seen[column] == 1 else f"{column}_{seen[column]}")
    return keys
