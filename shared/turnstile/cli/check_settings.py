"""`turnstile check-settings`: the functions' environment checked before it is deployed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, emit_json
from turnstile.ops import check_settings as check_ops
from turnstile.ops.errors import EXIT_OK, EXIT_PROBLEMS

__all__ = ["check_settings_command"]

EnvFileOption = Annotated[
    Path | None,
    typer.Option(
        "--env-file",
        metavar="FILE",
        help="KEY=VALUE lines or a JSON object (Terraform's rendered environment); default: this environment",
    ),
]


@guarded
def check_settings_command(env_file: EnvFileOption = None, output: OutputOption = Output.text) -> int:
    """Validate a functions' environment as the functions read it at cold start, plus what the
    configured runner needs (for Dataproc: the project and a batch it can build). Prints each problem
    with the variable and the fix; exits 1 when there is one. Run it before `terraform apply`."""
    environ = check_ops.read_env_file(env_file) if env_file else dict(os.environ)
    problems = check_ops.check(environ, unknown_are_problems=env_file is not None)
    source = str(env_file) if env_file else "this environment"
    if output is Output.json:
        emit_json({"source": source, "problems": [p.__dict__ for p in problems]})
        return EXIT_PROBLEMS if problems else EXIT_OK
    if not problems:
        runner = environ.get("JOB_RUNNER") or "local"
        typer.echo(f"settings of {source}: no problems found (runner {runner})")
        return EXIT_OK
    typer.echo(f"settings of {source}: {len(problems)} problem(s)")
    for problem in problems:
        typer.echo(f"  {problem.line()}")
    return EXIT_PROBLEMS
