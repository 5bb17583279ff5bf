"""What operator commands that change state share: show what they read and will do, ask before
they change it (or refuse without a terminal unless `--yes`), then report what they did."""

from __future__ import annotations

import sys
from typing import Protocol

import typer

from turnstile.cli._options import Output, emit_json
from turnstile.ops import render
from turnstile.ops.errors import Refused


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(question: str) -> bool:
    return typer.confirm(question, default=False, err=True)  # stdout stays the command's output


class _Plan(Protocol):
    def facts(self) -> list[tuple[str, object]]: ...
    def effects(self) -> list[str]: ...


class _Done(Protocol):
    def lines(self) -> list[str]: ...
    def to_json(self) -> dict[str, object]: ...


def _show(planned: _Plan, output: Output) -> None:
    """What an operator command read and what it will do, before it asks (text output only)."""
    if output is Output.text:
        out = render.console()
        render.show(out, render.table(("", ""), planned.facts(), header=False))
        for line in planned.effects():
            out.print(line)


def _ask(yes: bool, *, doing: str, do: str, question: str, kept: str = "nothing was changed") -> None:
    """Refused unless `--yes` was given or the operator confirms `question` at a terminal."""
    if yes:
        return
    if not _interactive():
        raise Refused(f"not {doing} without a confirmation and stdin is not a terminal; pass --yes to {do}")
    if not _confirm(question):
        raise Refused(f"not confirmed; {kept}")


def _report(done: _Done, output: Output) -> None:
    """What an operator command did: its JSON, or its lines."""
    if output is Output.json:
        emit_json(done.to_json())
        return
    out = render.console()
    for line in done.lines():
        out.print(line)
