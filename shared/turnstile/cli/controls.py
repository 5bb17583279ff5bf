"""Operator controls over a table's jobs: pause (undone by `resume`), cancel, skip a queued batch,
and mark a period missing."""

from __future__ import annotations

from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._confirm import _ask, _report
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, TableArg, emit_json
from turnstile.ops import controls, render, session
from turnstile.ops import mark_missing as missing_ops
from turnstile.ops import skip as skip_ops
from turnstile.state.records import CancelChoice
from turnstile.store.port import object_uri


@guarded
def pause_command(
    uri: TableArg,
    reason: Annotated[str | None, typer.Option("--reason", help="shown by turnstile status")] = None,
    output: OutputOption = Output.text,
) -> None:
    """Start no job for the table until `turnstile resume`: a running job finishes, new batches keep
    queuing in order, the sweeper leaves the table alone."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    _report(controls.pause(session.invocation(store, target.settings), table, reason), output)


@guarded
def cancel_command(
    uri: TableArg,
    requeue: Annotated[
        bool,
        typer.Option(
            "--requeue",
            help="keep the batch the job had not committed first in the backlog (default: block the "
            "table on it until turnstile unlock)",
        ),
    ] = False,
    output: OutputOption = Output.text,
) -> None:
    """Cancel the job that holds the table (an unordered table: its running jobs). What it committed
    stays (each batch is its own commit); the batch it had not committed blocks the table (unordered:
    waits for turnstile retry), or with --requeue is applied by the next job."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    target.refuse_local_jobs_on_cloud(store)  # before the lock records the cancel
    runner = session.LazyRunner(lambda: target.runner(store))
    choice = CancelChoice.REQUEUE if requeue else CancelChoice.BLOCK
    _report(controls.cancel(session.invocation(store, target.settings, runner), table, choice), output)


@guarded
def skip_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE/REL", help="the batch folder")],
    reason: Annotated[str | None, typer.Option("--reason", help="kept in the batch's record")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    output: OutputOption = Output.text,
) -> None:
    """Drop a batch of an ordered table that has not been applied (it was applied or repaired by
    hand): records it as dropped, as unlock --skip-head does, and deletes its backlog pointer.
    Deleting the pointer by hand does not skip it: the batch is queued again as a lost event."""
    target = _target.current()
    bucket, success = _target.batch_success(target, uri)
    store = target.store(bucket)
    _target.require_stored(store, success.rpartition("/")[0], "no batch there")  # a typo
    inv = session.invocation(store, target.settings)
    _ask(yes, doing="skipping", do="skip", question=skip_ops.question(object_uri(store, success)))
    done = skip_ops.skip(inv, success, reason)
    if output is Output.json:
        emit_json(done.__dict__)
        return
    out = render.console()
    for line in done.lines():
        out.print(line)


@guarded
def mark_missing_command(
    uri: TableArg,
    period: Annotated[
        str,
        typer.Argument(
            metavar="PERIOD",
            help="the period in the table's natural_time format, e.g. 2026/01/01/10 (hourly)",
        ),
    ],
    *,
    reason: Annotated[str | None, typer.Option("--reason", help="kept in the period's record")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="check the period, change nothing")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    output: OutputOption = Output.text,
) -> None:
    """Declare that a period of a table with a natural_time will have no batch: its watermark passes
    the period as if it were committed, and the tables that depend on it go on without it."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    inv = session.invocation(store, target.settings)
    where = object_uri(store, table.prefix)
    _, start = missing_ops.check(inv, table, period)  # Refused, naming the format, before asking
    if dry_run:
        if output is Output.json:
            emit_json({"table": where, "period": period, "start": start, "dry_run": True})
            return
        render.console().print(f"would record period {period} of {where} ({start.isoformat()}) as missing")
        render.console().print("dry run: nothing was changed")
        return
    _ask(yes, doing="marking", do="mark", question=missing_ops.question(where, period))
    _report(missing_ops.mark_missing(inv, table, period, reason), output)
