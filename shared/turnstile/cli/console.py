"""`turnstile ui`: the operator console, a local web page over the bucket (`turnstile.ui`).

This is its composition root, as every command is its own: the store is built from the URI (or the
local stack) and the settings as `status` builds them, the job runner as `retry` and `cancel` build
it, errors are worded by the CLI's `describe`, and the console is read-only when asked or when the
credentials cannot write."""

from __future__ import annotations

import logging
from typing import Annotated

import typer

from turnstile.cli import _errors, _target
from turnstile.cli._errors import SCHEME, guarded
from turnstile.core import logs
from turnstile.names.uris import in_scheme
from turnstile.ops import session
from turnstile.store.port import object_uri, writable
from turnstile.ui import security, serve
from turnstile.ui.app import create_app
from turnstile.ui.context import Console

DEFAULT_PORT = 8765


@guarded
def ui_command(
    uri: Annotated[
        str | None,
        typer.Argument(
            metavar="gs://BUCKET[/PREFIX]",
            help="the bucket (or a dataset's folder) whose tables to show; default: the local stack's bucket",
        ),
    ] = None,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="port on 127.0.0.1; 0: any free one")
    ] = DEFAULT_PORT,
    open_browser: Annotated[bool, typer.Option("--open", help="open the console in the browser")] = False,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="show everything, change nothing (no actions)")
    ] = False,
) -> None:
    """Serve the operator console on 127.0.0.1: tables and their health, a table's batches over
    time, its failure and the commands to fix it, the lineage graph, and the operator actions
    behind a confirmation. The URL printed carries a token the console requires."""
    target = _target.current()
    bucket, prefix = _target.bucket_and_prefix(target, uri)
    store = target.store(bucket)
    if prefix.strip("/"):
        _target.require_stored(store, prefix, "no tables there")  # a typo
    scheme, storage = SCHEME.get(), target.storage

    def describe(exc: BaseException) -> str | None:
        said = _errors.describe(exc, storage)
        return None if said is None else in_scheme(said[1], scheme, bucket)

    reason = "started with --read-only" if read_only else None
    if reason is None and writable(store) is False:
        reason = f"the credentials in use may not write to {object_uri(store, '').rstrip('/')}"
    console = Console(
        store=store,
        settings=_target.layout_settings(target.settings, store, prefix),
        token=security.new_token(),
        prefix=prefix.strip("/"),
        storage=storage,
        read_only=reason is not None,
        read_only_reason=reason,
        runner=session.LazyRunner(lambda: target.runner(store)),
        refuse_jobs=lambda: target.refuse_local_jobs_on_cloud(store),
        describe=describe,
        # fake-gcs-server walks the whole bucket for every listing, whatever its prefix: one
        # listing of the prefix serves every table there; on GCS (and S3) one per table.
        one_listing=bool(target.settings.storage_emulator_host),
    )
    sock = serve.bind(port)
    _audit_to_stderr()
    serve.run(
        create_app(console),
        sock,
        serve.url_of(sock, console.token),
        say=typer.echo,
        open_browser=open_browser,
    )


def _audit_to_stderr() -> None:
    """The protocol's warnings (a table unlocked, paused, a batch skipped by an operator) as JSON
    lines on stderr while the console runs, instead of the records a command collects and drops."""
    logging.getLogger(logs.LOGGER_NAME).handlers = []
    logs.configure("WARNING")
