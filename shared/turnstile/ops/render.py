"""Text for people (rich tables, progress bars on stderr) and JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

WIDE = 400  # when stdout is not a terminal (a pipe, a test): wide enough that rows do not wrap


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr); colours and the real width only on a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr, highlight=False)
    return Console(file=stream, width=WIDE, no_color=True, highlight=False, soft_wrap=False)


def progress(*, bytes_: bool = False) -> Progress:
    """A progress bar on stderr, so `--output json` keeps stdout clean."""
    count = TextColumn("{task.completed:,.0f}/{task.total:,.0f} bytes") if bytes_ else MofNCompleteColumn()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        count,
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=not sys.stderr.isatty(),  # a pipe gets no half-drawn bars
    )


def table(
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    title: str | None = None,
    header: bool = True,
    null: str = "-",
    precise: bool = False,
) -> Table:
    """`precise`: timestamps to the microsecond (a query's rows; the operator's views keep seconds)."""
    shown = Table(
        title=title, title_justify="left", header_style="bold", box=None, pad_edge=False, show_header=header
    )
    for column in columns:
        shown.add_column(column, overflow="fold")
    for row in rows:
        shown.add_row(*(cell(value, null, precise=precise) for value in row))
    return shown


def show(out: Console, renderable: Table) -> None:
    """Print a table; off a terminal without the padding rich leaves at the end of each line."""
    if out.is_terminal:
        out.print(renderable)
        return
    with out.capture() as captured:
        out.print(renderable)
    out.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def cell(value: object, null: str = "-", *, precise: bool = False) -> Text:
    if value is None:
        return Text(null)
    if isinstance(value, bool):
        return Text("yes" if value else "no")
    if isinstance(value, datetime):
        fraction = ".%f" if precise and value.microsecond else ""
        return Text(value.strftime(f"%Y-%m-%d %H:%M:%S{fraction}"))
    return Text(str(value))  # Text, not markup: object names may hold `[`


def age(seconds: float | None) -> str | None:
    """`3d4h`, `2h5m`, `4m12s`, `37s`: the two largest units."""
    if seconds is None:
        return None
    total = max(int(seconds), 0)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h"
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, default=_default, ensure_ascii=False)


def _default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)  # Decimal, date, UUID...
