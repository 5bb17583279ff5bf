"""What the console works with, built by its composition root (`turnstile ui`, `cli/console.py`) the
way a command builds its own: the bucket's store, the settings, a job runner for the actions that
submit or cancel jobs, and how the CLI words an error. Nothing here reads the environment."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from turnstile.config.settings import Settings
from turnstile.core.clock import Clock, SystemClock
from turnstile.core.errors import PathError
from turnstile.jobs.port import JobRunner
from turnstile.names.paths import LOCK, Table, table_of_state_object
from turnstile.ops import session
from turnstile.ops.errors import Refused
from turnstile.protocol.context import Invocation
from turnstile.store.port import ObjectStore, object_uri


def _no_check() -> None:
    return None


def _plain(exc: BaseException) -> str | None:
    del exc
    return None


@dataclass
class Console:
    store: ObjectStore
    settings: Settings  # with the destination regex in force at `prefix`
    token: str
    prefix: str = ""  # the folder `turnstile ui gs://BUCKET/PREFIX` names: its tables are shown
    storage: str = "storage"  # where storage calls go, as the CLI says it
    read_only: bool = False
    read_only_reason: str | None = None  # why: --read-only, or the credentials cannot write
    runner: JobRunner = field(default_factory=session.NoRunner)  # retry and cancel use it
    refuse_jobs: Callable[[], None] = _no_check  # raises when jobs must not run from here
    describe: Callable[[BaseException], str | None] = _plain  # an error as the CLI words it; None: a bug
    clock: Clock = field(default_factory=SystemClock)
    workers: int = 8  # tables whose status is read at once: each is a listing and a few reads
    one_listing: bool = False  # one listing of the prefix serves every table (an emulator's)
    refresh_seconds: float = 10.0  # the tables are read again so long after the last reading began
    max_age_seconds: float = 30.0  # no page shows a reading older: it waits for a new one...
    patience_seconds: float = 0.5  # ...so long, then shows how far the new one has got

    def invocation(self, *, jobs: bool = False) -> Invocation:
        """A fresh invocation, as a command builds per run: reads are cached within it only."""
        return session.invocation(self.store, self.settings, self.runner if jobs else None, self.clock)

    @property
    def where(self) -> str:
        return object_uri(self.store, self.prefix.strip("/")).rstrip("/")

    def table(self, prefix: str) -> Table:
        """The table whose folder is `prefix`; Refused for a folder that is no table, or one
        outside the console's prefix."""
        prefix = prefix.strip("/")
        below = self.prefix.strip("/")
        if below and prefix != below and not prefix.startswith(f"{below}/"):
            raise Refused(
                f"{object_uri(self.store, prefix)} is not under {self.where}, which this console shows"
            )
        try:
            table = table_of_state_object(
                self.store.bucket, f"{prefix}/{LOCK}", self.settings.destination_regex
            )
        except PathError as exc:
            raise Refused(f"{object_uri(self.store, prefix)} is not a table folder: {exc}") from exc
        if table.prefix != prefix:
            raise Refused(f"{object_uri(self.store, prefix)} is not a table folder; its table is {table.uri}")
        return table
