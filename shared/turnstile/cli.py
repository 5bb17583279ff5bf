"""The `turnstile` operator command."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer

from turnstile.config import ConfigReader
from turnstile.errors import TurnstileError
from turnstile.explain import explain
from turnstile.paths import parse_gs_uri
from turnstile.settings import Settings
from turnstile.wiring import object_store

app = typer.Typer(help="Ordered, exactly-once ingestion of GCS batches into Iceberg.", no_args_is_help=True)

EXIT_USER_ERROR = 2


class Output(StrEnum):
    text = "text"
    json = "json"


OutputOption = Annotated[Output, typer.Option("--output", "-o", help="text for people, json for scripts")]


@app.command("explain")
def explain_command(uri: str, output: OutputOption = Output.text) -> None:
    """Show how turnstile reads one object: its kind, table, batch, ordering and config."""
    try:
        settings = Settings.from_env()
        bucket, name = parse_gs_uri(uri)
        described = explain(name, bucket, settings, ConfigReader(object_store(settings, bucket)))
    except TurnstileError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USER_ERROR) from exc
    if output is Output.json:
        typer.echo(json.dumps(described, indent=2))
    else:
        width = max(len(k) for k in described)
        for key, value in described.items():
            typer.echo(f"{key:<{width}}  {value}")


def main() -> None:
    app()
