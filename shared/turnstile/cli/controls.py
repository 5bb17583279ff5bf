"""Operator controls over a table's jobs: pause (undone by `resume`), cancel, and skip a queued batch."""

from __future__ import annotations

from typing import Annotated

import typer

from turnstile.cli import _target
from turnstile.cli._errors import guarded
from turnstile.cli._options import Output, OutputOption, TableArg, emit_json
from turnstile.cli.tables import _confirm, _interactive
from turnstile.ops import render, session
from turnstile.ops import skip as skip_ops
from turnstile.ops.errors import Refused
from turnstile.protocol import operator
from turnstile.protocol.lock import read as read_lock
from turnstile.state.records import CancelChoice, LockState
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
    where = object_uri(store, table.prefix)
    operator.pause(session.invocation(store, target.settings), table, reason)
    if output is Output.json:
        emit_json({"table": where, "paused": True, "reason": reason})
        return
    out = render.console()
    out.print(f"paused {where}: no job starts until: turnstile resume {where}")


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
    where = object_uri(store, table.prefix)
    target.refuse_local_jobs_on_cloud(store)  # before the lock records the cancel
    runner = session.LazyRunner(lambda: target.runner(store))
    choice = CancelChoice.REQUEUE if requeue else CancelChoice.BLOCK
    inv = session.invocation(store, target.settings, runner)
    held, _ = read_lock(inv, table)
    job_ids = operator.cancel(inv, table, choice)
    if output is Output.json:
        emit_json({"table": where, "job_id": job_ids[0], "job_ids": list(job_ids), "then": choice.value})
        return
    out = render.console()
    out.print(f"asked the job service to cancel {', '.join(job_ids)}")
    if held.state is not LockState.RUNNING:  # an unordered table's jobs, one batch each
        then = "is applied again by a new job" if requeue else f"waits for: turnstile retry {where}/REL"
        out.print(
            f"when each has stopped, its batch, if not committed, {then}; follow it with: turnstile status"
        )
        return
    then = "stays first in the backlog" if requeue else f"blocks the table until: turnstile unlock {where}"
    out.print(f"when it has stopped, the batch it had not committed {then}; follow it with: turnstile status")


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
    if not yes:
        if not _interactive():
            raise Refused(
                "not skipping without a confirmation and stdin is not a terminal; pass --yes to skip"
            )
        if not _confirm(
            f"skip the batch of {object_uri(store, success)}: record it as dropped, not applied?"
        ):
            raise Refused("not confirmed; nothing was changed")
    done = skip_ops.skip(inv, success, reason)
    if output is Output.json:
        emit_json(done.__dict__)
        return
    out = render.console()
    out.print(f"{done.batch} (generation {done.generation}) is recorded as dropped by an operator")
    out.print(f"deleted its pointer {done.pointer}" if done.pointer else "it had no pointer queued")
    if done.taken_by_job:
        out.print(f"but job {done.taken_by_job} locked the table meanwhile and applies it: see status")
    out.print(f"upload its _SUCCESS again to apply it; follow it with: turnstile history {done.table}")
