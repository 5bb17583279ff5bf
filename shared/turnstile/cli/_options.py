"""What every command shares: the `--output` option, the table argument, and JSON on stdout."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from turnstile.ops import render


class Output(StrEnum):
    text = "text"
    json = "json"


OutputOption = Annotated[Output, typer.Option("--output", "-o", help="text for people, json for scripts")]
TableArg = Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE", help="the table's folder")]


def emit_json(value: Any) -> None:
    typer.echo(render.to_json(value))
