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


class StoreUnavailable(TurnstileError, Transient):
    """The object store did not answer after retries (429, 5xx, timeouts)."""


class StoreRefused(TurnstileError, Terminal):
    """The object store refused a call for a reason retrying will not fix: no such bucket, missing
    or wrong credentials, access denied."""


class JobServiceUnavailable(TurnstileError, Transient):
    """The job service (Dataproc, local runner) did not answer after retries."""


class JobError(TurnstileError, Terminal):
    """A job could not be submitted or described for a reason retrying will not fix."""


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
