"""Commands on one table's state: status, unlock, resume, history."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from turnstile.cli import _target
from turnstile.cli._confirm import _ask, _report, _show
from turnstile.cli._errors import SCHEME, guarded, one_line
from turnstile.cli._options import Output, OutputOption, TableArg, emit_json
from turnstile.ops import controls, render, session, status_drivers, status_jobs
from turnstile.ops import history as history_ops
from turnstile.ops import status as status_ops
from turnstile.ops import unlock as unlock_ops
from turnstile.ops.errors import EXIT_OK, EXIT_PROBLEMS
from turnstile.ops.status_views import LockView
from turnstile.store.port import object_uri

# -- status ----------------------------------------------------------------------------------------


@guarded
def status_command(
    uri: Annotated[
        str | None,
        typer.Argument(
            metavar="gs://BUCKET[/PREFIX]",
            help="a bucket, a dataset folder or a table folder; default: the local stack's bucket",
        ),
    ] = None,
    output: OutputOption = Output.text,
) -> int:
    """Per table: health, ordering, backlog, lock, subscriber, gate file, last applied batch, age of
    the oldest pending batch and lag of the last commit.

    Exits 1 when a table is BLOCKED (FAILED lock) or its state cannot be read."""
    target = _target.current()
    bucket, prefix = _target.bucket_and_prefix(target, uri)
    store = target.store(bucket)
    inv = session.invocation(store, _target.layout_settings(target.settings, store, prefix))
    if len([p for p in prefix.split("/") if p]) >= 2 and not inv.settings.destination_regex:
        # A table folder: not one of its batches, and not a typo with nothing under it.
        _target.require_table(store, _target.table_of(f"{SCHEME.get()}://{bucket}/{prefix}"))
    cache: dict[str, bool] = {}
    # Tables read 8 at a time; on the emulator, one listing of the prefix serves them all (`ui` too).
    found = status_ops.statuses(
        inv, prefix, cache, workers=8, one_listing=bool(target.settings.storage_emulator_host)
    )
    problems = any(s.health.is_problem for s in found)
    where = f"{SCHEME.get()}://{bucket}/{prefix}".rstrip("/")
    warm = status_drivers.read(store, inv.clock.now())
    if output is Output.json:
        tables = [s.to_json() for s in found]
        emit_json(
            {
                "bucket": bucket,
                "prefix": prefix,
                "storage": target.storage,
                "tables": tables,
                "warm_drivers": warm.to_json(),
            }
        )
        return EXIT_PROBLEMS if problems else EXIT_OK
    out = render.console()
    out.print(f"{where} on {target.storage}")
    if not found:
        out.print(f"no tables under {where} (tables are <dataset>/<table>/ folders)")
    else:
        render.show(out, render.table(STATUS_COLUMNS, (_status_row(s) for s in found)))
        _status_details(out, found)
    _show_drivers(out, warm)
    return EXIT_PROBLEMS if problems else EXIT_OK


DRIVER_COLUMNS = (
    "DRIVER",
    "BATCH",
    "STATE",
    "AGE",
    "JOBS SERVED",
    "RUNNING",
    "SLOTS",
    "IDLE FOR",
    "HEARTBEAT",
    "DCU-S",
)


def _show_drivers(out: Console, warm: status_drivers.DriversView) -> None:
    """The warm drivers and their queue, when the deployment has any (docs/DRIVER.md)."""
    if warm.empty:
        return
    out.print(f"warm drivers: {len(warm.drivers)}, requests queued: {warm.queued}")
    rows = (
        (
            d.driver_id,
            d.batch,
            f"{d.state} ({d.reason})" if d.reason else d.state,
            render.age(d.age_seconds),
            d.jobs_served,
            d.serving,
            f"{d.busy_slots}/{d.slots}",
            render.age(d.idle_seconds),
            f"{render.age(d.heartbeat_age_seconds)} ago",
            f"{d.dcu_seconds:,.0f}",
        )
        for d in warm.drivers
    )
    render.show(out, render.table(DRIVER_COLUMNS, rows))


STATUS_COLUMNS = (
    "TABLE",
    "HEALTH",
    "ORDERED",
    "BACKLOG",
    "HEAD",
    "LOCK",
    "JOB",
    "LOCK AGE",
    "SUBSCRIBER",
    "GATE",
    "LAST APPLIED",
    "LAST RESULT",
    "WATERMARK",  # tables with natural_time: committed with no gap up to here
    "WM LAG",  # how far the watermark is behind the clock
    "OLDEST PENDING",  # age of the oldest pending batch
    "COMMIT LAG",  # since the last result's job finished
)


def _status_row(s: status_ops.TableStatus) -> tuple[object, ...]:
    lock = s.lock
    subscriber = f"live ({s.subscriber.state})" if s.subscriber.live else f"no ({s.subscriber.state})"
    result = s.last_result
    last = None
    if result is not None:
        when = result.finished_at.strftime("%Y-%m-%d %H:%M") if result.finished_at else "?"
        which = "" if result.rel == s.last_applied else f"{result.rel or '(flat)'}: "
        last = f"{which}{result.outcome} {result.rows_written} rows {when}"
    return (
        s.table,
        s.health,
        s.ordered,
        f"{s.backlog_depth}+" if s.backlog_capped else s.backlog_depth,
        s.backlog_head,
        lock.state if lock else "?",
        lock.job_id if lock else None,
        render.age(lock.age_seconds) if lock else None,
        subscriber,
        None if s.gate_present is None else ("present" if s.gate_present else "missing"),
        s.last_applied,
        last,
        s.watermark,
        render.age(s.watermark_lag_seconds),
        render.age(s.oldest_pending_age_seconds),
        render.age(s.last_commit_lag_seconds),
    )


def _blocked_details(out: Console, name: str, lock: LockView) -> None:
    """Why a BLOCKED table stopped, and the commands that release it, runnable as printed."""
    out.print()
    out.print(
        f"{name} is BLOCKED at batch {lock.failed_rel!r} since {render.age(lock.age_seconds)} ago "
        f"(job {lock.job_id or 'none: stopped before one was submitted'}, "
        f"lock generation {lock.generation})"
    )
    out.print(f"  error:  {lock.error}")
    if lock.covers:
        out.print(f"  covers: {', '.join(lock.covers)}")
    out.print(f"  fix the cause, then run: {lock.unlock_command}")
    for choice in lock.unlock_options:
        out.print(f"  or, to {choice.does}: {lock.unlock_command} {choice.option}")
    if lock.publish_command:
        out.print(f"  or, to publish the staged batch to main as it is: {lock.publish_command}")


def _status_details(out: Console, found: list[status_ops.TableStatus]) -> None:
    """Below the table: what to do about each table that needs a human (or is waiting)."""
    for s in found:
        lock = s.lock
        if s.health == status_ops.Health.BLOCKED and lock is not None:
            _blocked_details(out, s.table, lock)
        elif s.health == status_ops.Health.RETRYING and lock is not None and lock.retry_at is not None:
            out.print()
            rel = lock.covers[0] if lock.covers else s.backlog_head
            out.print(
                f"{s.table}: batch {rel!r} failed for a transient reason (attempt {lock.attempt}); its job "
                f"is tried again at {lock.retry_at:%Y-%m-%d %H:%M:%S} by the sweeper, and the table "
                "blocks if the retries (job_retries) run out"
            )
            out.print(f"  error:  {lock.last_error}")
        elif s.health == status_ops.Health.STALLED:
            out.print()
            out.print(
                f"{s.table} has queued batches and no live subscriber ({s.subscriber.state}); the sweeper "
                f"restarts it within minutes, or run: turnstile resume {s.uri}"
            )
        elif s.health == status_ops.Health.GATED:
            out.print()
            out.print(f"{s.table} holds its backlog until {s.gate} exists")
        elif s.health == status_ops.Health.WAITING:
            out.print()
            waiting = f"batch {s.backlog_head!r}" if s.backlog_head else "the derived table"
            out.print(f"{s.table}: {waiting} waits for {'; '.join(s.waiting_for)}")
            for rel, why in list(s.waiting_batches.items())[1:]:
                out.print(f"  then {rel!r} waits for {'; '.join(why)}")
        if s.missing_period is not None:
            out.print()
            since = f" for {render.age(s.missing_seconds)}" if s.missing_seconds is not None else ""
            alert = " (over max_gap_wait: the watermark_gap alert)" if s.missing_over_max else ""
            holds = ", ".join(s.missing_holds) or "no registered dependent"
            out.print(
                f"{s.table}: period {s.missing_period.isoformat()} is missing{since}{alert} while later "
                f"ones are committed; the watermark waits for it, holding {holds}"
            )
            out.print(
                f"  let it land, drop it (turnstile skip), or run: turnstile mark-missing {s.uri} PERIOD"
            )
        if s.paused is not None:
            out.print()
            reason = f" ({s.paused.reason})" if s.paused.reason else ""
            held = f"; {s.held} unordered batch(es) held" if s.held else ""
            out.print(
                f"{s.table} is paused since {s.paused.at:%Y-%m-%d %H:%M:%S}{reason}: no job starts{held}; "
                f"run: {s.paused.resume_command}"
            )
        for job in s.open_jobs:
            out.print()
            out.print(status_jobs.describe(s.table, job))
        for lines in _request_details(s):
            out.print()
            for line in lines:
                out.print(line)
        for failed in s.failed_batches:
            out.print()
            when = (
                f"retried at {failed.retry_at:%Y-%m-%d %H:%M:%S} (attempt {failed.attempt + 1})"
                if failed.retry_at
                else f"fix the cause, then run: {failed.retry_command}"
            )
            out.print(f"{s.table}: batch {failed.rel!r} failed (job {failed.job_id}): {failed.error}")
            out.print(f"  {when}")
        for error in s.errors:
            out.print()
            out.print(f"{s.table}: {error}")


def _request_details(s: status_ops.TableStatus) -> list[list[str]]:
    """Pending reprocess requests and step rebuilds, and each STALE step with the command that fixes it."""
    found = []
    if s.reprocess_pending:
        found.append(
            [
                f"{s.table}: {s.reprocess_pending} reprocess request(s) pending, each applied after the "
                f"batches queued before it; turnstile history {s.uri} shows them as REPROCESSED"
            ]
        )
    if s.rebuilds_pending:
        since = f"{s.rebuilds_oldest:%Y-%m-%d %H:%M:%S}" if s.rebuilds_oldest else "?"
        found.append(
            [
                f"{s.table}: {s.rebuilds_pending} step rebuild(s) pending after a source changed (the oldest "
                f"change at {since}); turnstile history {s.uri} shows them as REBUILT"
            ]
        )
    for stale in s.stale_steps:
        found.append(
            [
                f"{s.table}: step {stale.rel!r} is STALE: {stale.source} committed {stale.source_rel!r} "
                "after it was built (mode append cannot replace its rows)",
                f"  delete the step's rows from the table, then run: {stale.command}",
            ]
        )
    return found


# -- unlock, resume --------------------------------------------------------------------------------


@guarded
def unlock_command(
    uri: TableArg,
    skip_head: Annotated[
        bool,
        typer.Option(
            "--skip-head", help="drop the failed batch's pointer: it was applied or repaired by hand"
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    expect_generation: Annotated[
        int | None,
        typer.Option(
            "--expect-generation",
            help="refuse unless the lock is still at this generation (from status --output json)",
        ),
    ] = None,
    output: OutputOption = Output.text,
) -> None:
    """Release a FAILED lock (refused if it changed since it was shown), then restart the subscriber.

    Without --skip-head the failed batch is applied again; with it, its pointer is dropped."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    where = object_uri(store, table.prefix)
    inv = session.invocation(store, target.settings)
    planned = unlock_ops.plan(inv, table, skip_head=skip_head, expect_generation=expect_generation)
    _show(planned, output)
    _ask(yes, doing="unlocking", do="unlock", question=f"unlock {where}?", kept="the lock was left as it is")
    _report(unlock_ops.apply(inv, planned), output)


@guarded
def resume_command(uri: TableArg, output: OutputOption = Output.text) -> None:
    """Undo `turnstile pause` and start the table's subscriber now (a new `_BACKFILL` generation);
    also the go-ahead under WAIT_FOR_VALIDATION."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    _report(controls.resume(session.invocation(store, target.settings), table), output)


# -- history ---------------------------------------------------------------------------------------


@guarded
def history_command(
    uri: TableArg,
    last: Annotated[int, typer.Option("--last", min=0, help="show the last N records; 0: all")] = 100,
    output: OutputOption = Output.text,
) -> None:
    """The table's result records, and the failure records of unordered batches that have none, in
    the order its batches apply: rel, generation, outcome, rows, bad rows, seconds, snapshot id,
    finished at, and the rows that failed load.json's expectations when the table has any."""
    target = _target.current()
    table = _target.table_at(target, uri)
    store = target.store(table.bucket)
    _target.require_table(store, table)
    found = history_ops.history(
        store, table, success_filename=target.settings.success_filename, last=last or None
    )
    where = object_uri(store, table.prefix)
    if output is Output.json:
        emit_json({"table": where, "total": found.total, "entries": [e.to_json() for e in found.entries]})
        return
    out = render.console()
    if not found.entries:
        out.print(f"no result records under {object_uri(store, table.internal)}results/ yet")
        return
    errors = any(e.note() for e in found.entries)
    expected = any(e.expectations for e in found.entries)
    columns = ["REL", "GENERATION", "OUTCOME", "ROWS", "BAD ROWS", "SECONDS", "SNAPSHOT", "FINISHED AT"]
    columns += ["EXPECTATIONS"] if expected else []
    rows = [
        [
            e.rel,
            e.generation,
            e.outcome,
            e.rows_written,
            e.bad_rows,
            f"{e.seconds:.1f}",
            e.snapshot_id,
            e.finished_at,
        ]
        + ([e.expectations_text()] if expected else [])
        + ([one_line(e.note() or "", 120) or None] if errors else [])
        for e in found.entries
    ]
    render.show(out, render.table([*columns, *(["ERROR"] if errors else [])], rows))
    if found.total > len(found.entries):
        out.print(f"the last {len(found.entries)} of {found.total} records; --last 0 shows all")
