"""`turnstile publish`: accept the staged batch of a table blocked by a failed audit as it is."""

from __future__ import annotations

import getpass
from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._confirm import _ask, _report, _show
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, TableArg
from turnstile.ops import publish as publish_ops
from turnstile.ops import session


def _local_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name and no passwd entry (a bare container)
        return "unknown"


@guarded
def publish_command(
    uri: TableArg,
    *,
    reason: Annotated[str | None, typer.Option("--reason", help="kept in the batch's result record")] = None,
    by: Annotated[
        str | None,
        typer.Option("--by", help="who publishes it (default: the local user)"),
    ] = None,
    expect_generation: Annotated[
        int | None,
        typer.Option(
            "--expect-generation",
            help="refuse unless the lock is still at this generation (turnstile status prints it)",
        ),
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
    planned = publish_ops.plan(
        inv, table, by=by or _local_user(), reason=reason, expect_generation=expect_generation
    )
    _show(planned, output)
    question = f"publish batch {planned.batch.rel!r} of {planned.where} without its audits?"
    _ask(yes, doing="publishing", do="publish", question=question, kept="the lock was left as it is")
    _report(publish_ops.apply(inv, planned), output)
