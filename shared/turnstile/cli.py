"""The `turnstile` operator command.

Every command talks to the local stack when `<TURNSTILE_HOME>/stack.json` exists (its emulator,
bucket and warehouse) and STORAGE_EMULATOR_HOST is not set; otherwise to GCS with the usual Google
credentials (`resolve_settings`, the one place that decides). Text for people, `--output json` for
scripts. Exit codes: 0 ok; 1 problems found or the command failed; 2 the command was not run (usage,
bad settings, refused). An error is one line on stderr: `error: <what went wrong>; <what to do>`.
See docs/CLI.md.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, ParamSpec

import requests
import typer
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc
from rich.console import Console

from turnstile import wiring
from turnstile.config import ConfigReader
from turnstile.errors import PathError, SettingsError, StoreUnavailable, TurnstileError
from turnstile.explain import explain
from turnstile.local import commands as local_commands
from turnstile.local import stackinfo
from turnstile.local.stackinfo import StackInfo
from turnstile.ops import backfill as backfill_ops
from turnstile.ops import history as history_ops
from turnstile.ops import query as query_ops
from turnstile.ops import render, session
from turnstile.ops import status as status_ops
from turnstile.ops import upload as upload_ops
from turnstile.ops import validate as validate_ops
from turnstile.ops.errors import EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, Refused
from turnstile.paths import LOCK, Table, parse_bucket_uri, table_of_state_object
from turnstile.protocol import operator
from turnstile.protocol.operator import UnlockRefused
from turnstile.protocol.subscriber import read_lock
from turnstile.records import Lock, LockState
from turnstile.settings import Settings
from turnstile.store.port import ObjectStore, object_uri

app = typer.Typer(help="Ordered, exactly-once ingestion of GCS batches into Iceberg.", no_args_is_help=True)

EXIT_USER_ERROR = EXIT_USAGE  # kept for callers of the first version


class Output(StrEnum):
    text = "text"
    json = "json"


OutputOption = Annotated[Output, typer.Option("--output", "-o", help="text for people, json for scripts")]
TableArg = Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE", help="the table's folder")]


# -- where the commands talk to --------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Settings with the local stack applied, and a phrase naming where storage calls go."""

    settings: Settings
    stack: StackInfo | None
    home: Path

    @property
    def storage(self) -> str:
        if _SCHEME.get() == "s3":
            endpoint = self.settings.aws_endpoint_url
            return f"the S3 endpoint at {endpoint}" if endpoint else "Amazon S3"
        host = self.settings.storage_emulator_host
        if self.stack is not None and host == self.stack.storage_url:
            return f"the local stack at {host}"
        return f"the emulator at {host}" if host else "Google Cloud Storage"

    def store(self, bucket: str) -> ObjectStore:
        """The bucket's store: S3 when the command was given an s3:// URI, else GCS."""
        if _SCHEME.get() == "s3":
            return wiring.s3_store(self.settings, bucket)
        return wiring.object_store(self.settings, bucket)


def resolve_settings(environ: dict[str, str] | None = None) -> Target:
    """Settings from the environment; when `<TURNSTILE_HOME>/stack.json` exists and
    STORAGE_EMULATOR_HOST is unset, the stack's emulator, warehouse and catalog fill them in."""
    settings = Settings.from_env(environ)
    home = Path(settings.turnstile_home)
    try:
        stack = stackinfo.load(home)
    except (ValueError, TypeError) as exc:
        raise SettingsError(
            f"{home / stackinfo.STACK_FILE} is not a stack file ({exc}); remove it, or run turnstile up again"
        ) from exc
    if stack is not None and not settings.storage_emulator_host:
        settings = settings.model_copy(
            update={
                "storage_emulator_host": stack.storage_url,
                "iceberg_warehouse": settings.iceberg_warehouse or stack.warehouse,
                "iceberg_catalog": stack.catalog,
            }
        )
    return Target(settings, stack, home)


@contextmanager
def exported(target: Target) -> Iterator[None]:
    """The stack's storage and warehouse in this process's environment while it may start jobs:
    a local job runs in a child process that reads its settings from the environment."""
    stack, settings = target.stack, target.settings
    if stack is None or settings.storage_emulator_host != stack.storage_url:
        yield
        return
    values = {
        "STORAGE_EMULATOR_HOST": stack.storage_url,
        "ICEBERG_WAREHOUSE": settings.iceberg_warehouse or stack.warehouse,
        "ICEBERG_CATALOG": settings.iceberg_catalog,
    }
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _parse(uri: str) -> tuple[str, str]:
    """(bucket, path) of a gs:// or s3:// URI; the command's stores follow the URI's scheme."""
    where = parse_bucket_uri(uri)
    _SCHEME.set(where.scheme)
    if where.scheme == "s3":
        _STORAGE.set("S3")  # for the hints of storage errors
    return where.bucket, where.path


def _bucket_and_prefix(target: Target, uri: str | None) -> tuple[str, str]:
    if uri is not None:
        return _parse(uri)
    if target.stack is None:
        raise Refused(
            f"no bucket given and no local stack at {target.home / stackinfo.STACK_FILE}; "
            "pass gs://BUCKET[/PREFIX], or start the local stack with turnstile up"
        )
    return target.stack.bucket, ""


def _table(uri: str) -> Table:
    bucket, prefix = _parse(uri)
    if len([p for p in prefix.split("/") if p]) < 2:
        raise Refused(f"{uri} does not name a table; pass gs://BUCKET/DATASET/TABLE")
    return table_of_state_object(bucket, f"{prefix}/{LOCK}")


# -- errors: one line, one exit code ----------------------------------------------------------------

P = ParamSpec("P")
_STORAGE: ContextVar[str] = ContextVar("storage", default="storage")  # for the hints of storage errors
_SCHEME: ContextVar[str] = ContextVar("scheme", default="gs")  # of the bucket URI the command was given


def _one_line(text: str, limit: int = 600) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe(exc: BaseException, storage: str = "storage") -> tuple[int, str] | None:
    """(exit code, `<what>; <what to do>`) for an error the operator can act on; None: a bug."""
    what = _one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, gexc.GoogleAPICallError):
        what = re.sub(r"\?\S*(?=:)", "", what, count=1)  # the request's query string says nothing

    def line(hint: str) -> str:
        return what if ";" in what else f"{what}; {hint}"

    match exc:
        case Refused() | UnlockRefused():
            return EXIT_USAGE, line("nothing was changed")
        case PathError():
            return EXIT_USAGE, line("use gs://BUCKET/DATASET/TABLE[/REL] with the layout of README.md")
        case SettingsError():
            return EXIT_USAGE, line("fix the environment variable (docs/CONFIGURATION.md)")
        case StoreUnavailable():
            return EXIT_PROBLEMS, line(f"check that {storage} is reachable, then run the command again")
        case TurnstileError():
            return EXIT_PROBLEMS, line("fix the object named, then run the command again")
        case gexc.NotFound():
            return EXIT_PROBLEMS, line(f"check the bucket name; it does not exist in {storage}")
        case gexc.Forbidden() | gexc.Unauthorized():
            return EXIT_PROBLEMS, line(
                "check your credentials (gcloud auth application-default login) and the bucket's IAM"
            )
        case gexc.GoogleAPIError():
            return EXIT_PROBLEMS, line(f"{storage} refused the call; run the command again")
        case auth_exc.DefaultCredentialsError():
            return EXIT_USAGE, (
                "no Google credentials found; run gcloud auth application-default login, "
                "or start the local stack with turnstile up"
            )
        case requests.RequestException():
            return EXIT_PROBLEMS, line(f"check that {storage} is reachable")
        case OSError():
            return EXIT_PROBLEMS, line("check the local path and its permissions")
    return None


def guarded(func: Callable[P, int | None]) -> Callable[P, None]:
    """Run a command with the protocol's logs collected (not printed at the operator) and every
    error it can explain turned into one line on stderr and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> None:
        _STORAGE.set("storage")
        _SCHEME.set("gs")
        with session.captured_logs():
            try:
                code = func(*args, **kwargs)
            except typer.Exit:
                raise
            except Exception as exc:
                described = describe(exc, _STORAGE.get())
                if described is None:
                    raise
                typer.echo(f"error: {described[1]}", err=True)
                raise typer.Exit(described[0]) from None
        if code:
            raise typer.Exit(code)

    return wrapper


def _target() -> Target:
    target = resolve_settings()
    _STORAGE.set(target.storage)
    return target


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(question: str) -> bool:
    return typer.confirm(question, default=False, err=True)  # stdout stays the command's output


def _emit_json(value: Any) -> None:
    typer.echo(render.to_json(value))


# -- commands --------------------------------------------------------------------------------------


@app.command("explain")
@guarded
def explain_command(uri: str, output: OutputOption = Output.text) -> None:
    """Show how turnstile reads one object: its kind, table, batch, ordering and config."""
    target = _target()
    bucket, name = _parse(uri)
    described = explain(name, bucket, target.settings, ConfigReader(target.store(bucket)))
    if output is Output.json:
        _emit_json(described)
        return
    width = max(len(k) for k in described)
    for key, value in described.items():
        typer.echo(f"{key:<{width}}  {value}")


@app.command("status")
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
    """Per table: health, ordering, backlog, lock, subscriber, gate file and last applied batch.

    Exits 1 when a table is BLOCKED (FAILED lock) or its state cannot be read."""
    target = _target()
    bucket, prefix = _bucket_and_prefix(target, uri)
    inv = session.invocation(target.store(bucket), target.settings)
    cache: dict[str, bool] = {}
    found = [status_ops.table_status(inv, table, cache) for table in status_ops.tables_under(inv, prefix)]
    problems = any(s.health in status_ops.Health.PROBLEMS for s in found)
    where = f"{_SCHEME.get()}://{bucket}/{prefix}".rstrip("/")
    if output is Output.json:
        tables = [s.to_json() for s in found]
        _emit_json({"bucket": bucket, "prefix": prefix, "storage": target.storage, "tables": tables})
        return EXIT_PROBLEMS if problems else EXIT_OK
    out = render.console()
    out.print(f"{where} on {target.storage}")
    if not found:
        out.print(f"no tables under {where} (tables are <dataset>/<table>/ folders)")
        return EXIT_OK
    render.show(out, render.table(STATUS_COLUMNS, (_status_row(s) for s in found)))
    _status_details(out, found)
    return EXIT_PROBLEMS if problems else EXIT_OK


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
    )


def _status_details(out: Console, found: list[status_ops.TableStatus]) -> None:
    """Below the table: what to do about each table that needs a human (or is waiting)."""
    for s in found:
        lock = s.lock
        if s.health == status_ops.Health.BLOCKED and lock is not None:
            out.print()
            out.print(
                f"{s.table} is BLOCKED at batch {lock.failed_rel!r} since {render.age(lock.age_seconds)} ago "
                f"(job {lock.job_id or '-'}, lock generation {lock.generation})"
            )
            out.print(f"  error:  {lock.error}")
            if lock.covers:
                out.print(f"  covers: {', '.join(lock.covers)}")
            out.print(
                f"  fix the cause, then run: turnstile unlock {s.uri}  (add --skip-head to drop the batch)"
            )
        elif s.health == status_ops.Health.STALLED:
            out.print()
            out.print(
                f"{s.table} has queued batches and no live subscriber ({s.subscriber.state}); the sweeper "
                f"restarts it within minutes, or run: turnstile resume {s.uri}"
            )
        elif s.health == status_ops.Health.GATED:
            out.print()
            out.print(f"{s.table} holds its backlog until {s.gate} exists")
        for error in s.errors:
            out.print()
            out.print(f"{s.table}: {error}")


@app.command("unlock")
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
    target = _target()
    table = _table(uri)
    inv = session.invocation(target.store(table.bucket), target.settings)
    lock, generation = read_lock(inv, table)
    if expect_generation is not None and generation != expect_generation:
        raise Refused(
            f"{table.uri}: the lock is at generation {generation}, not {expect_generation}: it changed "
            "since it was read; run turnstile status again and retry"
        )
    if lock.state is not LockState.FAILED:
        raise Refused(
            f"{table.uri}: the lock is {lock.state.value}, not FAILED, so there is nothing to unlock; "
            f"see turnstile status {table.uri}"
        )
    if output is Output.text:
        _show_failed_lock(render.console(), table, lock, generation, skip_head=skip_head)
    if not yes:
        if not _interactive():
            raise Refused(
                "not unlocking without a confirmation and stdin is not a terminal; pass --yes to unlock"
            )
        if not _confirm(f"unlock {table.uri}?"):
            raise Refused("not confirmed; the lock was left as it is")
    done = operator.unlock(inv, table, skip_head=skip_head, expected_generation=generation)
    retried = not skip_head or done.dropped_pointer is None
    if output is Output.json:
        _emit_json(
            {
                "table": table.uri,
                "released": True,
                "lock_generation": generation,
                "failed_rel": done.failed_rel,
                "job_id": done.job_id,
                "skip_head": skip_head,
                "dropped_pointer": done.dropped_pointer,
                "batch_retried": retried and bool(lock.covers),
                "subscriber_restarted": True,
            }
        )
        return
    out = render.console()
    out.print(f"released the FAILED lock of {table.uri} (generation {generation})")
    if done.dropped_pointer:
        out.print(
            f"dropped the pointer of batch {done.failed_rel!r}: it counts as applied and is not retried"
        )
    elif skip_head and lock.covers:
        out.print(
            f"the pointer of batch {done.failed_rel!r} was already gone or re-published with a new "
            "generation, which will be applied"
        )
    elif lock.covers:
        out.print(f"batch {done.failed_rel!r} will be applied again")
    out.print("restarted the subscriber (a new _BACKFILL generation); follow it with: turnstile status")


def _show_failed_lock(out: Console, table: Table, lock: Lock, generation: int, *, skip_head: bool) -> None:
    rows: list[tuple[str, object]] = [
        ("table", table.uri),
        ("state", lock.state.value),
        ("lock generation", generation),
        ("failed batch", lock.failed_rel),
        ("job", lock.job_id),
        ("failed at", lock.updated_at),
        ("error", lock.error),
        ("last applied", lock.position),
    ]
    render.show(out, render.table(("", ""), rows, header=False))
    if skip_head:
        out.print(f"unlock --skip-head drops batch {lock.failed_rel!r} (its pointer) and releases the lock")
    else:
        out.print(f"unlock releases the lock; batch {lock.failed_rel!r} is applied again")


@app.command("resume")
@guarded
def resume_command(uri: TableArg, output: OutputOption = Output.text) -> None:
    """Start the table's subscriber now (a new `_BACKFILL` generation); also the go-ahead under
    WAIT_FOR_VALIDATION."""
    target = _target()
    table = _table(uri)
    inv = session.invocation(target.store(table.bucket), target.settings)
    lock, _ = read_lock(inv, table)
    generation = operator.resume(inv, table)
    if output is Output.json:
        _emit_json({"table": table.uri, "backfill_generation": generation, "lock": lock.state.value})
        return
    out = render.console()
    out.print(f"restarted the subscriber of {table.uri} (_BACKFILL generation {generation})")
    if lock.state is LockState.FAILED:
        out.print(
            f"the table is BLOCKED at batch {lock.failed_rel!r}: the subscriber stops at once; fix the "
            f"cause, then run: turnstile unlock {table.uri}"
        )


@app.command("history")
@guarded
def history_command(
    uri: TableArg,
    last: Annotated[int, typer.Option("--last", min=0, help="show the last N records; 0: all")] = 100,
    output: OutputOption = Output.text,
) -> None:
    """The table's result records in the order its batches apply: rel, generation, outcome, rows,
    bad rows, seconds, snapshot id, finished at."""
    target = _target()
    table = _table(uri)
    found = history_ops.history(
        target.store(table.bucket),
        table,
        success_filename=target.settings.success_filename,
        last=last or None,
    )
    if output is Output.json:
        _emit_json(
            {"table": table.uri, "total": found.total, "entries": [e.to_json() for e in found.entries]}
        )
        return
    out = render.console()
    if not found.entries:
        out.print(f"no result records under {table.uri}/_turnstile/results/ yet")
        return
    errors = any(e.error for e in found.entries)
    columns = ["REL", "GENERATION", "OUTCOME", "ROWS", "BAD ROWS", "SECONDS", "SNAPSHOT", "FINISHED AT"]
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
        + ([_one_line(e.error or "", 120) or None] if errors else [])
        for e in found.entries
    ]
    render.show(out, render.table([*columns, *(["ERROR"] if errors else [])], rows))
    if found.total > len(found.entries):
        out.print(f"the last {len(found.entries)} of {found.total} records; --last 0 shows all")


@app.command("validate")
@guarded
def validate_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET[/PREFIX]")],
    output: OutputOption = Output.text,
) -> int:
    """Check every `_config/` file and every `_SUCCESS` batch path under the prefix against the
    rules, applying nothing. Exits 1 when something is wrong."""
    target = _target()
    bucket, prefix = _parse(uri)
    store = target.store(bucket)
    objects = validate_ops.objects_to_check(store, prefix)
    with render.progress() as bar:
        task = bar.add_task("validating", total=len(objects))
        report = validate_ops.validate(store, target.settings, objects, lambda: bar.advance(task))
    if output is Output.json:
        _emit_json(
            {
                "prefix": uri,
                "configs": report.configs,
                "batches": report.batches,
                "problems": [p.__dict__ for p in report.problems],
                "warnings": [w.__dict__ for w in report.warnings],
            }
        )
        return EXIT_PROBLEMS if report.problems else EXIT_OK
    out = render.console()
    out.print(f"checked {report.configs} _config/ files and {report.batches} batches under {uri}")
    for title, listed in (("problems", report.problems), ("warnings", report.warnings)):
        if listed:
            out.print()
            out.print(f"{title} ({len(listed)}):")
            _print_grouped(out, listed)
    if not report.problems:
        out.print("no problems found")
    return EXIT_PROBLEMS if report.problems else EXIT_OK


GROUP_SHOWN = 10


def _print_grouped(out: Console, problems: list[validate_ops.Problem]) -> None:
    """Each problem under its object; past GROUP_SHOWN objects with the same message, a count."""
    seen: dict[str, int] = {}
    for problem in problems:
        seen[problem.message] = seen.get(problem.message, 0) + 1
        if seen[problem.message] <= GROUP_SHOWN:
            out.print(f"  {problem.object}")
            out.print(f"      {problem.message}")
    for message, count in seen.items():
        if count > GROUP_SHOWN:
            out.print(
                f"  ... and {count - GROUP_SHOWN} more objects with: {message[:100]} "
                "(--output json lists all)"
            )


@app.command("backfill")
@guarded
def backfill_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/PREFIX")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be published")] = False,
    output: OutputOption = Output.text,
) -> int:
    """Publish the `_SUCCESS` objects already under the prefix whose events never came, as the
    function would have (idempotent: a batch already handled is left alone). Exits 1 when a batch
    was rejected or could not be handled."""
    target = _target()
    bucket, prefix = _parse(uri)
    store = target.store(bucket)
    found = backfill_ops.candidates(store, target.settings, prefix)
    if dry_run:
        if output is Output.json:
            _emit_json([{"object": object_uri(store, c.name), "generation": c.generation} for c in found])
            return EXIT_OK
        out = render.console()
        out.print(f"{len(found)} _SUCCESS objects under {uri} (dry run: nothing handled)")
        rows = ((object_uri(store, c.name), c.generation) for c in found)
        render.show(out, render.table(("OBJECT", "GENERATION"), rows))
        return EXIT_OK
    runner = session.LazyRunner(lambda: wiring.job_runner(target.settings, store))
    with exported(target), session.captured_logs() as records, render.progress() as bar:
        task = bar.add_task("publishing", total=len(found))
        summary = backfill_ops.publish(
            found,
            lambda: session.invocation(store, target.settings, runner),
            records,
            lambda: bar.advance(task),
        )
    if output is Output.json:
        _emit_json(
            {
                "prefix": uri,
                "counts": summary.counts(),
                "objects": [o.__dict__ for o in summary.outcomes],
            }
        )
        return EXIT_PROBLEMS if summary.failed else EXIT_OK
    out = render.console()
    counts = ", ".join(f"{n} {result}" for result, n in sorted(summary.counts().items()))
    out.print(f"{len(found)} _SUCCESS objects under {uri}: {counts or 'nothing to do'}")
    for outcome in summary.outcomes:
        if outcome.error:
            out.print(
                f"  {outcome.object} (generation {outcome.generation}): {outcome.result}: {outcome.error}"
            )
    if summary.failed:
        out.print("fix the problems shown, then run backfill again: batches already handled are skipped")
    return EXIT_PROBLEMS if summary.failed else EXIT_OK


@app.command("put")
@guarded
def put_command(
    local_dir: Annotated[Path, typer.Argument(metavar="LOCAL_DIR", help="folder of the batch's data files")],
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE/REL")],
    force: Annotated[
        bool, typer.Option("--force", help="upload even if the batch folder already holds objects")
    ] = False,
    output: OutputOption = Output.text,
) -> None:
    """Upload a batch: every file of LOCAL_DIR, then `_SUCCESS` last."""
    target = _target()
    bucket, folder = _parse(uri)
    store = target.store(bucket)
    planned = upload_ops.plan(local_dir, store, target.settings, folder, force=force)
    with render.progress(bytes_=True) as bar:
        task = bar.add_task(f"uploading {len(planned.files)} files", total=planned.total_bytes)
        uploaded = upload_ops.put(store, planned, lambda n: bar.advance(task, n))
    success = uploaded[-1]
    if output is Output.json:
        _emit_json(
            {
                "batch": object_uri(store, planned.batch.folder),
                "table": f"{planned.batch.table.dataset}.{planned.batch.table.table}",
                "rel": planned.batch.rel,
                "files": [u.__dict__ for u in uploaded[:-1]],
                "success": success.__dict__,
                "skipped": list(planned.skipped),
            }
        )
        return
    out = render.console()
    out.print(
        f"uploaded {len(uploaded) - 1} files ({planned.total_bytes:,} bytes) to "
        f"{object_uri(store, planned.batch.folder)}"
    )
    if planned.skipped:
        out.print(f"skipped (the job ignores names starting with . or _): {', '.join(planned.skipped)}")
    out.print(
        f"wrote {success.object} last (generation {success.generation}); follow it with: turnstile status"
    )


@app.command("query")
@guarded
def query_command(
    sql: Annotated[str, typer.Argument(metavar='"SQL"', help="one Spark SQL statement")],
    limit: Annotated[int, typer.Option("--limit", min=1, help="print at most this many rows")] = 1000,
    output: OutputOption = Output.text,
) -> None:
    """Run Spark SQL on the local stack's Iceberg warehouse (tables are `<catalog>.<ds>.<table>`,
    the catalog is the default one) and print the rows."""
    target = _target()
    stack, warehouse = query_ops.locate(target.stack, target.home)
    found = query_ops.run(stack, warehouse, sql, limit)
    if output is Output.json:
        keys = _unique(found.columns)
        _emit_json(
            {
                "columns": list(found.columns),
                "rows": [dict(zip(keys, row, strict=True)) for row in found.rows],
                "truncated": found.truncated,
            }
        )
        return
    out = render.console()
    if found.columns:
        render.show(out, render.table(found.columns, found.rows, null="NULL"))
    shown = f"{len(found.rows)} rows"
    out.print(f"{shown}, more not shown (--limit)" if found.truncated else shown)


def _unique(columns: tuple[str, ...]) -> list[str]:
    """JSON object keys for the columns: a repeated name gets `_2`, `_3`..."""
    seen: dict[str, int] = {}
    keys = []
    for column in columns:
        seen[column] = seen.get(column, 0) + 1
        keys.append(column if seen[column] == 1 else f"{column}_{seen[column]}")
    return keys


app.command("up")(local_commands.up)
app.command("down")(local_commands.down)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
