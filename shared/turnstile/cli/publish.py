"""`turnstile publish`: accept the staged batch of a table blocked by a failed audit as it is."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, TableArg, emit_json
from turnstile.cli.tables import _confirm, _interactive
from turnstile.ops import publish as publish_ops
from turnstile.ops import render, session
from turnstile.ops.errors import Refused


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        return "unknown"


@guarded
def publish_command(
    uri: TableArg,
    reason: Annotated[str | None, typer.Option("--reason", help="kept in the batch's result record")] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="who publishes it (default: the local user)"),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    output: OutputOption = Output.text,
) -> None:
    """Publish, without its audits, the staged batch a failed audit blocks the table on.

    Refused unless the lock is FAILED on a batch whose audits found offending rows. Records who and
    why, then releases the lock: the next job publishes the staged commit (PUBLISHED_OVERRIDE)."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    inv = session.invocation(store, target.settings)
    planned = publish_ops.plan(inv, table, by=by or _local_user(), reason=reason)
    if output is Output.text:
        out = render.console()
        render.show(out, render.table(("", ""), planned.facts(), header=False))
        for line in planned.effects():
            out.print(line)
    if not yes:
        if not _interactive():
            raise Refused(
                "not publishing without a confirmation and stdin is not a terminal; pass --yes to publish"
            )
        if not _confirm(f"publish batch {planned.batch.rel!r} of {planned.where} without its audits?"):
            raise Refused("not confirmed; the lock was left as it is")
    done = publish_ops.apply(inv, planned)
    if output is Output.json:
        emit_json(done.to_json())
        return
    out = render.console()
    for line in done.lines():
        out.print(line)
