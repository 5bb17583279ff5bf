"""Commands on batches and object names: put, backfill, validate, explain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from google.auth.exceptions import DefaultCredentialsError
from rich.console import Console

from turnstile.cli import _target
from turnstile.cli._errors import SCHEME, guarded
from turnstile.cli._options import Output, OutputOption, emit_json
from turnstile.config.cascade import ConfigReader
from turnstile.config.settings import Settings
from turnstile.core.errors import PathError
from turnstile.names.paths import parse_success
from turnstile.ops import backfill as backfill_ops
from turnstile.ops import render, session
from turnstile.ops import reprocess as reprocess_ops
from turnstile.ops import retry as retry_ops
from turnstile.ops import upload as upload_ops
from turnstile.ops import validate as validate_ops
from turnstile.ops.errors import EXIT_OK, EXIT_PROBLEMS
from turnstile.ops.explain import explain, reads_config
from turnstile.store.port import object_uri


@guarded
def explain_command(uri: str, output: OutputOption = Output.text) -> None:
    """Show how turnstile reads one object: its kind, table, batch, ordering and config."""
    target = _target.current()
    bucket, name = _target.parse(uri)
    if not name:
        raise PathError(f"{uri} names a bucket, not an object; pass {SCHEME.get()}://BUCKET/OBJECT")
    configs, unread = None, ""
    if reads_config(name, target.settings):  # only then a storage client, and maybe credentials
        try:
            configs = ConfigReader(target.store(bucket))
        except DefaultCredentialsError:
            unread = (
                f"no Google credentials to read gs://{bucket} (gcloud auth application-default login, "
                "or turnstile up for the local stack)"
            )
    try:
        described = explain(name, bucket, target.settings, configs, unread, scheme=SCHEME.get())
    except PathError as exc:
        hint = _folder_hint(uri, bucket, name, target.settings)
        raise PathError(f"{hint} (as an object: {exc})" if hint else str(exc)) from None
    if output is Output.json:
        emit_json(described)
        return
    width = max(len(k) for k in described)
    for key, value in described.items():
        typer.echo(f"{key:<{width}}  {value}")


def _folder_hint(uri: str, bucket: str, name: str, settings: Settings) -> str:
    """For a name that reads as no object of a batch but is a table's folder: say so."""
    try:
        batch = parse_success(
            bucket, f"{name.rstrip('/')}/{settings.success_filename}", settings.destination_regex
        )
    except PathError:
        return ""
    table = batch.table
    return (
        f"{uri} names no object of a batch; if it is a folder, it is "
        f"{'table' if not batch.rel else 'a batch of table'} "
        f"{table.dataset}.{table.table}: explain an object in it, e.g. "
        f"{uri.rstrip('/')}/{'<batch>/' if not batch.rel else ''}{settings.success_filename}"
    )


@guarded
def validate_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET[/PREFIX]")],
    output: OutputOption = Output.text,
) -> int:
    """Check every `_config/` file and every `_SUCCESS` batch path under the prefix against the
    rules, applying nothing. Exits 1 when something is wrong."""
    target = _target.current()
    bucket, prefix = _target.parse(uri)
    store = target.store(bucket)
    _target.require_stored(store, prefix)
    objects = validate_ops.objects_to_check(store, prefix)
    with render.progress() as bar:
        task = bar.add_task("validating", total=len(objects))
        report = validate_ops.validate(
            store, target.settings, objects, lambda: bar.advance(task), prefix=prefix
        )
    if output is Output.json:
        emit_json(
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


@guarded
def backfill_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/PREFIX")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="list what would be published")] = False,
    output: OutputOption = Output.text,
) -> int:
    """Publish the `_SUCCESS` objects already under the prefix whose events never came, as the
    function would have (idempotent: a batch already handled is left alone). Exits 1 when a batch
    was rejected or could not be handled."""
    target = _target.current()
    bucket, prefix = _target.parse(uri)
    store = target.store(bucket)
    _target.require_stored(store, prefix)
    found = backfill_ops.candidates(store, target.settings, prefix)
    if dry_run:
        if output is Output.json:
            emit_json([{"object": object_uri(store, c.name), "generation": c.generation} for c in found])
            return EXIT_OK
        out = render.console()
        out.print(f"{len(found)} _SUCCESS objects under {uri} (dry run: nothing handled)")
        rows = ((object_uri(store, c.name), c.generation) for c in found)
        render.show(out, render.table(("OBJECT", "GENERATION"), rows))
        return EXIT_OK
    # From the target's settings: a local job's environment names the stack's storage and warehouse.
    runner = session.LazyRunner(lambda: target.runner(store))
    with session.captured_logs() as records, render.progress() as bar:
        task = bar.add_task("publishing", total=len(found))
        summary = backfill_ops.publish(
            found,
            lambda: session.invocation(store, target.settings, runner),
            records,
            lambda: bar.advance(task),
        )
    if output is Output.json:
        emit_json(
            {"prefix": uri, "counts": summary.counts(), "objects": [o.__dict__ for o in summary.outcomes]}
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


@guarded
def retry_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE/REL", help="the failed batch's folder")],
    output: OutputOption = Output.text,
) -> int | None:
    """Apply again an unordered batch whose job failed (after fixing the cause): its next attempt
    runs under a new job id. An ordered table's failed batch is retried with `turnstile unlock`."""
    target = _target.current()
    bucket, folder = _target.parse(uri)
    if not folder:
        raise PathError(
            f"{uri} names a bucket; pass the failed batch's folder, {SCHEME.get()}://BUCKET/DS/TABLE/REL"
        )
    store = target.store(bucket)
    target.refuse_local_jobs_on_cloud(store)  # before the attempt is claimed
    runner = session.LazyRunner(lambda: target.runner(store))
    inv = session.invocation(store, target.settings, runner)
    done = retry_ops.retry(inv, f"{folder.rstrip('/')}/{target.settings.success_filename}")
    if output is Output.json:
        emit_json(done.__dict__)
        return EXIT_PROBLEMS if done.refused else None
    out = render.console()
    for line in done.lines():
        out.print(line)
    return EXIT_PROBLEMS if done.refused else None


@guarded
def reprocess_command(
    uri: Annotated[str, typer.Argument(metavar="gs://BUCKET/DS/TABLE/REL", help="the batch folder")],
    reason: Annotated[str | None, typer.Option("--reason", help="kept in the request")] = None,
    output: OutputOption = Output.text,
) -> None:
    """Apply an already committed batch once more, deliberately: after the batches queued before
    it, as a commit of its own, shown as REPROCESSED by `turnstile history`."""
    target = _target.current()
    bucket, success = _target.batch_success(target, uri)
    store = target.store(bucket)
    inv = session.invocation(store, target.settings)
    done = reprocess_ops.request(inv, success, reason)
    if output is Output.json:
        emit_json(done.__dict__)
        return
    out = render.console()
    for line in done.lines():
        out.print(line)


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
    target = _target.current()
    bucket, folder = _target.parse(uri)
    store = target.store(bucket)
    planned = upload_ops.plan(local_dir, store, target.settings, folder, force=force)
    with render.progress(bytes_=True) as bar:
        task = bar.add_task(f"uploading {len(planned.files)} files", total=planned.total_bytes)
        uploaded = upload_ops.put(store, planned, lambda n: bar.advance(task, n))
    success = uploaded[-1]
    if output is Output.json:
        emit_json(
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
    where = object_uri(store, planned.batch.folder)
    out.print(f"uploaded {len(uploaded) - 1} files ({planned.total_bytes:,} bytes) to {where}")
    if planned.skipped:
        out.print(f"skipped (the job ignores names starting with . or _): {', '.join(planned.skipped)}")
    out.print(
        f"wrote {success.object} last (generation {success.generation}); follow it with: turnstile status"
    )
