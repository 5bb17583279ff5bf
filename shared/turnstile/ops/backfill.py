"""`turnstile backfill`: act on `_SUCCESS` objects already in the bucket whose events never came
(turnstile deployed onto a bucket that already held batches, or events Eventarc gave up on).

How: the function's own handler is called for each object, with the generation the object has now,
exactly as if its event had been delivered (this is what the original loader's backfill tool did).
The alternative, re-writing each `_SUCCESS` so that a new generation fires a new event, was
rejected: a new generation is a new batch to turnstile, so a batch that was in fact applied would
be applied again, and two runs racing the asynchronous events could publish a batch twice.

Why this is idempotent: the handler's own effects are. An ordered batch's pointer is created only
if absent; an unordered batch's job id derives from its `_SUCCESS` generation, so the runner attaches
to a job already there. An object whose result record for its generation exists, or whose pointer
already names its generation, is not even passed to the handler (`already handled`). Objects are
handled in name order, so an ordered table's batches are queued oldest first and a subscriber that
starts meanwhile never sees a later batch before an earlier one.

What it needs: the same settings as the deployed functions (ORDER_PER_TABLE, DESTINATION_REGEX,
START_BACKFILL_FILENAME, SUCCESS_FILENAME), since they decide whether a batch is ordered. An ordered
batch only writes its pointer and `_BACKFILL`, whose event starts the deployed subscriber; an
unordered batch is submitted from this machine with JOB_RUNNER's runner (on the local stack, the
local runner). When that runner cannot be built the batch is reported as an error and nothing is
written for it, so a later run picks it up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from logging import LogRecord

from turnstile.config.settings import Settings
from turnstile.core.errors import ConfigError, Transient, TurnstileError
from turnstile.names.paths import ObjectKind, ObjectRef, classify
from turnstile.names.uris import in_scheme
from turnstile.protocol import handler
from turnstile.protocol.context import Invocation
from turnstile.state.records import Pointer
from turnstile.store.port import ObjectInfo, ObjectStore, object_uri

HANDLED = "already handled"


@dataclass(frozen=True)
class Candidate:
    name: str
    generation: int


@dataclass(frozen=True)
class Outcome:
    object: str  # gs:// or s3:// URI
    generation: int
    result: str  # queued | submitted | failed | already handled | duplicate | rejected | error
    error: str | None = None


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for outcome in self.outcomes:
            found[outcome.result] = found.get(outcome.result, 0) + 1
        return found

    @property
    def failed(self) -> bool:
        return any(o.result in ("rejected", "error") for o in self.outcomes)


def candidates(store: ObjectStore, settings: Settings, prefix: str) -> list[Candidate]:
    """The `_SUCCESS` objects under the prefix, in name order."""
    folder = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    listing: list[ObjectInfo] = store.list_objects(  # on S3 a generation is a HEAD: of `_SUCCESS` only
        folder,
        only=lambda name: (
            classify(name, settings.success_filename, settings.start_backfill_filename) is ObjectKind.SUCCESS
        ),
    )
    return [Candidate(info.name, info.generation) for info in listing]


def publish(
    found: list[Candidate],
    invocation: Callable[[], Invocation],
    logs: list[LogRecord],
    advance: Callable[[], None] = lambda: None,
) -> Summary:
    """Handle each candidate not yet handled, with a fresh `Invocation` each, as the function would.

    `logs` is where the protocol's log records land (see `session.captured_logs`): a rejected
    batch's reason is read from the handler's `rejected` record."""
    summary = Summary()
    for candidate in found:
        inv = invocation()
        uri = object_uri(inv.store, candidate.name)
        if _handled(inv, candidate):
            summary.outcomes.append(Outcome(uri, candidate.generation, HANDLED))
            advance()
            continue
        seen = len(logs)
        try:
            ref = ObjectRef.of(
                inv.store.bucket,
                candidate.name,
                candidate.generation,
                inv.settings.success_filename,
                inv.settings.start_backfill_filename,
            )
            result = handler.handle(inv, ref)
        except TurnstileError as exc:
            kind = "transient" if isinstance(exc, Transient) else "failed"
            failure = in_scheme(f"{kind}: {exc}", inv.store.scheme, inv.store.bucket)
            summary.outcomes.append(Outcome(uri, candidate.generation, "error", failure))
            advance()
            continue
        error = None
        if result == "rejected":
            reasons = [r.getMessage() for r in logs[seen:] if getattr(r, "event", None) == "rejected"]
            error = reasons[-1].removeprefix("rejected: ") if reasons else "rejected by the handler"
            error = in_scheme(error, inv.store.scheme, inv.store.bucket)
        summary.outcomes.append(
            Outcome(uri, candidate.generation, HANDLED if result == "duplicate" else result, error)
        )
        advance()
    return summary


def _handled(inv: Invocation, candidate: Candidate) -> bool:
    """Its generation was applied (a result record) or is queued (the pointer names it). A batch
    whose config does not resolve goes to the handler, which reports why."""
    try:
        batch, _ = inv.batch(candidate.name)
    except TurnstileError:
        return False
    if inv.store.stat(batch.table.result(batch.rel, candidate.generation)) is not None:
        return True
    found = inv.store.read(batch.pointer(inv.settings.success_filename))
    try:
        return (
            found is not None
            and Pointer.decode(found.data, found.name).success_generation == candidate.generation
        )
    except ConfigError:
        return False
