"""`turnstile up` and `turnstile down`: run the local stack in the foreground or the background."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from turnstile.config.settings import Settings
from turnstile.jobs.local import alive
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions
from turnstile.local.stackinfo import STACK_FILE, StackInfo, load

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="stack folder (default: TURNSTILE_HOME or .turnstile)")
]


def home_of(home: Path | None) -> Path:
    return (home or Path(Settings.from_env().turnstile_home)).resolve()


def describe(info: StackInfo) -> str:
    return (
        f"turnstile is up (home {info.home})\n"
        f"  storage   {info.storage_url}   bucket gs://{info.bucket}\n"
        f"  functions {info.function_url}   (events from the bucket arrive here)\n"
        f"  warehouse {info.warehouse}   (Iceberg catalog `{info.catalog}`)\n"
        "next:\n"
        f"  turnstile put ./my-batch gs://{info.bucket}/sales/orders/2024/05/01/13\n"
        f"  turnstile status\n"
        f'  turnstile query "SELECT * FROM {info.catalog}.sales.orders"\n'
        "  turnstile down"
    )


def up(
    home: HomeOption = None,
    bucket: Annotated[str, typer.Option(help="the bucket to create and watch")] = "turnstile-local",
    state_bucket: Annotated[
        str | None,
        typer.Option(help="a bucket, not watched, for turnstile's own objects (STATE_BUCKET)"),
    ] = None,
    detach: Annotated[
        bool, typer.Option("--detach", help="run in the background; stop with `turnstile down`")
    ] = False,
) -> None:
    """Start the local stack: GCS emulator, function hosts, event delivery, local Spark and Iceberg."""
    folder = home_of(home)
    running = load(folder)
    if running is not None and alive(running.pid):
        typer.echo(
            f"error: a stack already runs from {folder} (pid {running.pid}); run `turnstile down` first",
            err=True,
        )
        raise typer.Exit(2)
    if detach:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / STACK_FILE).unlink(missing_ok=True)
        with (folder / "stack.log").open("ab") as out:
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "turnstile.local.commands",
                    "up",
                    "--home",
                    str(folder),
                    "--bucket",
                    bucket,
                    *(["--state-bucket", state_bucket] if state_bucket else []),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        if not wait_until(lambda: load(folder) is not None, 120):
            typer.echo(f"error: the stack did not start; see {folder / 'stack.log'}", err=True)
            raise typer.Exit(1)
        info = load(folder)
        if info is None:  # gone again between the wait and the read: it stopped at once
            typer.echo(f"error: the stack stopped right after starting; see {folder / 'stack.log'}", err=True)
            raise typer.Exit(1)
        typer.echo(describe(info))
        return
    if state_bucket == bucket:
        typer.echo(f"error: --state-bucket must name another bucket than --bucket {bucket}", err=True)
        raise typer.Exit(2)
    state = {"STATE_BUCKET": state_bucket} if state_bucket else {}
    stack = Stack(StackOptions(home=folder, bucket=bucket, environment=state))
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        info = stack.start()
        typer.echo(describe(info) + "\n(Ctrl-C stops everything)")
        while True:
            time.sleep(1)
    except KeyboardInterrupt:
        typer.echo("stopping...")
    finally:
        stack.stop()
        typer.echo("stopped")


def down(home: HomeOption = None) -> None:
    """Stop the stack started from this home."""
    folder = home_of(home)
    info = load(folder)
    if info is None:
        typer.echo(f"no stack runs from {folder}")
        return
    if alive(info.pid):
        os.kill(info.pid, signal.SIGTERM)
        if not wait_until(lambda: not alive(info.pid), 30):
            os.kill(info.pid, signal.SIGKILL)
    (folder / STACK_FILE).unlink(missing_ok=True)
    typer.echo(f"stopped the stack of {folder}")


app = typer.Typer(help="The local stack.")
app.command("up")(up)
app.command("down")(down)

if __name__ == "__main__":
    app()
