"""Every error turnstile raises, in one flat module.

Two mixins decide what happens to a Cloud Function event:
- `Terminal`: retrying cannot help (bad config, bad path). Log, acknowledge, leave the table in a
  state `turnstile status` explains.
- `Transient`: the world may be different next time (storage 5xx, job service unavailable).
  Raise, so Eventarc redelivers the event with backoff.
An error that is neither is a bug or a protocol outcome the caller handles itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from turnstile.store.port import StoredObject


class Terminal:
    """Mixin: retrying the same event cannot succeed; acknowledge it."""


class Transient:
    """Mixin: the same event may succeed later; let the platform retry it."""


class TurnstileError(Exception):
    """Base of every turnstile error."""


class SettingsError(TurnstileError, Terminal):
    """An environment variable holds a value turnstile cannot use."""


class PathError(TurnstileError, Terminal):
    """An object name does not map to a table and batch."""


class ConfigError(TurnstileError, Terminal):
    """A `_config/` file is missing, malformed or contradicts another."""


class CorruptState(TurnstileError, Terminal):
    """A state object turnstile wrote contradicts itself (edited by hand, or written by something
    else); the message names it and what to do."""


class StoreUnavailable(TurnstileError, Transient):
    """The object store did not answer after retries (429, 5xx, timeouts)."""


class StoreRefused(TurnstileError, Terminal):
    """The object store refused a call for a reason retrying will not fix: no permission (401/403),
    missing or wrong credentials, no such bucket, or a request it cannot serve (400)."""


class JobServiceUnavailable(TurnstileError, Transient):
    """The job service (Dataproc, local runner) did not answer after retries."""


class JobError(TurnstileError, Terminal):
    """A job could not be submitted or described for a reason retrying will not fix."""


class JobDeferred(JobError):
    """The job service refused a job for a reason that passes (permission denied while a new IAM
    grant propagates): the protocol retries the job later, a bounded number of times with backoff;
    the event itself is acknowledged."""


class BatchFailed(TurnstileError, Terminal):
    """The batch cannot be applied (bad data, schema conflict, failing SQL): the job stops here."""


class AuditFailed(BatchFailed):
    """An audit of the table found offending rows in the batch's staged commit: the batch stays staged
    on the audit branch, which `turnstile publish` can publish as it is."""


class CorruptRecord(BatchFailed):
    """Rows of a batch do not fit its schema; `column` and `value` name the culprit when known."""

    def __init__(
        self,
        message: str,
        *,
        column: str | None = None,
        value: str | None = None,
        rows_read: int = 0,
        bad_rows: int = 0,
    ) -> None:
        super().__init__(message)
        self.column = column
        self.value = value
        self.rows_read = rows_read  # what the failed attempt read, for its result record
        self.bad_rows = bad_rows


class ExpectationFailed(BatchFailed):
    """Rows of a batch failed an expectation whose `on_fail` is `fail`; `counts` holds (name,
    on_fail, failed rows) of every expectation of the batch, for its result record."""

    def __init__(self, message: str, *, counts: tuple[tuple[str, str, int], ...], rows_read: int) -> None:
        super().__init__(message)
        self.counts = counts
        self.rows_read = rows_read


@dataclass
class PreconditionFailed(TurnstileError):
    """A generation precondition did not hold.

    `expected` is the generation the writer assumed (0 means "absent"); `found` is what the store
    holds now (None when the object is absent), read after the conflict so the caller can tell
    "somebody else won" from "my own earlier attempt already landed".
    """

    name: str
    expected: int
    found: StoredObject | None

    def __str__(self) -> str:
        found = "absent" if self.found is None else f"generation {self.found.generation}"
        wanted = "absent" if self.expected == 0 else f"generation {self.expected}"
        return f"precondition failed on {self.name}: expected {wanted}, found {found}"
