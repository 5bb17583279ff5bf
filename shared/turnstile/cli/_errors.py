"""One line on stderr and one exit code for every error the operator can act on."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec

import requests
import typer
from google.api_core import exceptions as gexc
from google.auth import exceptions as auth_exc

from turnstile.core.errors import PathError, SettingsError, StoreUnavailable, TurnstileError
from turnstile.names.uris import in_scheme
from turnstile.ops import session
from turnstile.ops.errors import EXIT_PROBLEMS, EXIT_USAGE, Refused
from turnstile.protocol.operator import CancelRefused, UnlockRefused

P = ParamSpec("P")
STORAGE: ContextVar[str] = ContextVar("storage", default="storage")  # for the hints of storage errors
SCHEME: ContextVar[str] = ContextVar("scheme", default="gs")  # of the bucket URI the command was given
BUCKET: ContextVar[str] = ContextVar("bucket", default="")  # of that URI: its locations in errors


def one_line(text: str, limit: int = 600) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def describe(exc: BaseException, storage: str = "storage") -> tuple[int, str] | None:
    """(exit code, `<what>; <what to do>`) for an error the operator can act on; None: a bug."""
    what = one_line(str(exc)) or type(exc).__name__
    if isinstance(exc, gexc.GoogleAPICallError):
        what = re.sub(r"\?\S*(?=:)", "", what, count=1)  # the request's query string says nothing

    def line(hint: str) -> str:
        return what if ";" in what else f"{what}; {hint}"

    match exc:
        case Refused() | UnlockRefused() | CancelRefused():
            return EXIT_USAGE, line("nothing was changed")
        case PathError():
            return EXIT_USAGE, line(
                f"use {SCHEME.get()}://BUCKET/DATASET/TABLE[/REL] with the layout of README.md"
            )
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
        STORAGE.set("storage")
        SCHEME.set("gs")
        BUCKET.set("")
        with session.captured_logs():
            try:
                code = func(*args, **kwargs)
            except typer.Exit:
                raise
            except BrokenPipeError:
                # The reader stopped reading (`| head`): nothing went wrong here, and nothing more
                # can be written; Python would print the error again as it flushes stdout at exit.
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                raise typer.Exit(0) from None
            except Exception as exc:
                described = describe(exc, STORAGE.get())
                if described is None:
                    raise
                typer.echo(f"error: {in_scheme(described[1], SCHEME.get(), BUCKET.get())}", err=True)
                raise typer.Exit(described[0]) from None
        if code:
            raise typer.Exit(code)

    return wrapper
