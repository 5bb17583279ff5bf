"""The JSON documents turnstile keeps in the bucket, as typed, validated values.

Lock, claim, pointer, manifest, per-batch result and job-done signal. Each knows how to encode
itself; `decode` names the object when its content is not what turnstile wrote.
"""

from __future__ import annotations

import json
import uuid
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_serializer,
    model_validator,
)

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import ConfigError

T = TypeVar("T", bound="Record")
DECODING = {"decoding": True}  # validation context of `Record.decode`: content read from the bucket


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    def encode(self) -> bytes:
        return self.model_dump_json(indent=1).encode()

    @classmethod
    def decode(cls: type[T], data: bytes, where: str) -> T:
        try:
            return cls.model_validate_json(data or b"{}", context=DECODING)
        except ValidationError as exc:
            raise ConfigError(
                f"{where} does not hold a turnstile {cls.__name__.lower()} ({exc.error_count()} problems: "
                f"{exc.errors(include_url=False)[0]['msg']}); it was written by something else"
            ) from exc


class LockState(StrEnum):
    FREE = "FREE"  # nobody holds the table
    RUNNING = "RUNNING"  # a job holds it: submitted, or about to be
    FAILED = "FAILED"  # a job failed: the table is blocked until a human unlocks it


class CoveredBatch(BaseModel):
    """One backlog pointer a job covers: which generation of which batch."""

    model_config = ConfigDict(frozen=True)

    rel: str
    pointer: str
    pointer_generation: int
    success_generation: int
    # An operator's `turnstile reprocess`: `pointer` names the request object, not a backlog pointer;
    # the batch was committed before, so it does not move the table's position.
    reprocess: bool = False


class CancelChoice(StrEnum):
    """What an operator's `turnstile cancel` does with the batch the cancelled job did not commit."""

    BLOCK = "block"  # the table stops on it, as on a failure, until `turnstile unlock`
    REQUEUE = "requeue"  # it stays first in the backlog; the next job applies it


class Lock(Record):
    """`<table>/_bqlock`. Changed only by compare-and-swap on the generation last read; a released
    lock is rewritten as FREE rather than deleted, so every transition has a precondition (GCS
    enforces preconditions on writes everywhere, including the emulator)."""

    state: LockState = LockState.FREE
    job_id: str | None = None
    covers: tuple[CoveredBatch, ...] = ()
    manifest: str | None = None
    acquired_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None
    error: str | None = None
    failed_rel: str | None = None
    unlock_command: str | None = None
    history: tuple[str, ...] = ()  # the last few job ids that held this table, newest last
    position: str | None = None  # rel of the last batch applied (or skipped by an operator)
    allow_late: str | None = None  # a pointer an operator let through although it sorts before position
    backfill_generation: int | None = None  # the _BACKFILL that started the last job (WAIT_FOR_VALIDATION)
    attempt: int = 0  # transient failures of the head batch so far (a success resets it)
    retry_at: AwareDatetime | None = None  # FREE after a transient failure: the head is retried then
    last_error: str | None = None  # the transient failure being retried
    # New on every write: no two lock writes carry the same bytes, so a compare-and-swap by content
    # hash (S3's ETag) tells every generation apart.
    nonce: str | None = None
    cancel: CancelChoice | None = None  # an operator cancelled the job: what happens to its batch

    @model_validator(mode="before")
    @classmethod
    def _written_by_turnstile(cls, data: Any, info: ValidationInfo) -> Any:
        """Every lock turnstile writes names its state. Any other JSON object (`{}`, the original
        loader's lock, an operator's manual hold) is someone else's: never taken for a FREE lock."""
        if not (info.context or {}).get("decoding") or not isinstance(data, dict) or "state" in data:
            return data
        if "job_id" in data and "table" in data:
            raise ValueError(
                f"it is gcs_ocn_bq_ingest's lock (job {data['job_id']!r}), left by the original's job or "
                "an operator's manual lock; delete it once no job of the original runs for the table"
            )
        raise ValueError("it has no 'state': it is not a lock turnstile wrote (a manual lock?)")


def new_nonce() -> str:
    return uuid.uuid4().hex


def wake_body() -> bytes:
    """The content of a `_BACKFILL` write: unique, so that on S3 (compare by ETag, a hash of the
    bytes) a conditional delete of an older `_BACKFILL` can never remove a newer one."""
    return json.dumps({"nonce": new_nonce()}).encode()


class Pause(Record):
    """`<table>/_turnstile/paused.json`: `turnstile pause`; `turnstile resume` removes it."""

    reason: str | None = None
    at: AwareDatetime


class Watermark(Record):
    """`<table>/_turnstile/watermark.json`: the natural time up to which every period of the table
    is committed or declared missing, with what lies beyond a gap (a record with no `last` was
    written before gaps were tracked: its `watermark` is the last commit's). Only moves forward."""

    watermark: AwareDatetime
    rel: str  # the batch that moved it there
    updated_at: AwareDatetime
    # Gap-aware (turnstile.protocol.gaps): `watermark` stops at the first missing period.
    ahead: tuple[tuple[AwareDatetime, AwareDatetime], ...] = ()  # runs present beyond it
    open: bool = False  # the latest present period is known only in part (finer batches)
    last: AwareDatetime | None = None  # where the last commit alone puts it (`gaps: "ignore"`)
    gap_since: AwareDatetime | None = None  # when the oldest missing period was first seen missing


class MissingPeriod(Record):
    """`<table>/_turnstile/missing/<period>.json`: `turnstile mark-missing`, a period declared to
    have no batch: the gap-aware watermark passes it as if it were committed."""

    period: str  # as given, in the natural time's format
    start: AwareDatetime
    reason: str | None = None
    at: AwareDatetime


class StepsPublished(Record):
    """`<table>/_turnstile/steps.json` of a derived table: the end of the last step published."""

    through: AwareDatetime
    updated_at: AwareDatetime


class Dependent(Record):
    """`<source>/_turnstile/dependents/<name>.json`: a table that waits for this one's watermark;
    the source wakes it when its watermark moves."""

    table: str  # the dependent's folder in the bucket


class ClaimState(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    DONE = "DONE"


class Claim(Record):
    """`_claimed_<name>_created_at_<generation>`: one event generation is acted on once."""

    state: ClaimState
    owner: str
    expires_at: AwareDatetime  # an IN_PROGRESS claim past this is abandoned and may be taken over


class Pointer(Record):
    """`<table>/_backlog/<rel>/_SUCCESS`: a batch waiting to be applied in order."""

    success: str
    success_generation: int
    published_at: AwareDatetime


class RebuildCause(BaseModel):
    """The source change a derived step is rebuilt for (`protocol.rebuilds`): a period of `table`
    committed (or reprocessed: `reprocess`, its request id) after the step had read it."""

    model_config = ConfigDict(frozen=True)

    table: str  # the source's folder
    rel: str
    success_generation: int
    reprocess: str | None = None
    at: AwareDatetime  # when the source's commit finished (its result record's `finished_at`)


class StaleStep(Record):
    """`<table>/_turnstile/stale/<rel>/<id>.json`: a step of an `append` derived table whose source
    changed after it was built; cleared by the next reprocess of the step."""

    rel: str
    cause: RebuildCause
    at: AwareDatetime


class ReprocessRequest(Pointer):
    """`<table>/_turnstile/reprocess/<id>.json`: an operator's `turnstile reprocess` of a committed
    batch. The subscriber applies it once, after the pointers queued before it (`after`: the last
    one when it was written), and removes it when that job committed it. A `Pointer` too, so the
    lock's covered batch reads the same way whichever it is."""

    rel: str
    after: str | None = None  # the name of the last backlog pointer when the request was written
    requested_at: AwareDatetime
    reason: str | None = None
    cause: RebuildCause | None = None  # a rebuild the protocol asked for (a derived step)


class PublishOverride(Record):
    """`<table>/_turnstile/publish/<rel>/<generation>.json`: an operator's `turnstile publish` of a
    batch whose audits failed: its next job publishes the staged commit without auditing it."""

    by: str
    reason: str | None = None
    at: AwareDatetime


class ManifestBatch(BaseModel):
    """One batch of a job, with everything the Spark job needs and nothing of the protocol."""

    model_config = ConfigDict(frozen=True)

    dataset: str
    table: str
    table_prefix: str
    rel: str
    success_generation: int
    data_uris: tuple[str, ...]
    # Bytes of each data file, from the submitter's listing, so the job need not stat them again.
    data_sizes: tuple[int, ...] | None = None
    load: LoadConfig
    transform_sql: str | None = None
    transform_source: str | None = None  # gs:// URI of the transform.sql in force: errors name it
    mapping_source: str | None = None  # URI of the load.json whose `mapping` is in force: errors name it
    audit_sql: str | None = None  # the audit.sql in force: SELECTs run on the staged commit
    audit_source: str | None = None  # gs:// URI of that audit.sql: errors name it
    config_digest: str
    max_batches_per_job: int = 1
    result: str  # object name of this batch's result record
    failed_prefix: str  # where bad rows go
    # The id of an operator's reprocess request: the batch is committed once more, under a commit key
    # of its own, instead of being skipped as already committed.
    reprocess: str | None = None
    rebuild: RebuildCause | None = None  # the reprocess is the protocol's rebuild of a derived step
    # The hour (or day...) the batch's path names, as the protocol parsed it with the table's
    # destination regex: what a `from_path: time` mapping entry writes.
    natural_time: AwareDatetime | None = None
    # A derived table's time step (no data files): the job runs transform.sql over the committed
    # source tables for rows in [window_start, window_end), UTC. None for a batch of files.
    window_start: AwareDatetime | None = None
    window_end: AwareDatetime | None = None
    # `turnstile publish`: its staged commit is published without running the audits (read by the
    # job from the table's `_turnstile/publish/` record, not written by the submitter).
    publish_override: PublishOverride | None = None

    @property
    def folder(self) -> str:
        """The batch folder (object name prefix, with its trailing slash)."""
        return f"{self.table_prefix}/{self.rel}/" if self.rel else f"{self.table_prefix}/"

    @field_serializer("load")
    def _load_as_in_load_json(self, load: LoadConfig) -> dict[str, Any]:
        """The keys of load.json (`schema`, `destinationRegex`), not the Python field names."""
        return load.model_dump(mode="json", by_alias=True)


class Manifest(Record):
    """What one job applies, in order. Written by the submitter before the job is submitted."""

    job_id: str
    bucket: str
    batches: tuple[ManifestBatch, ...]
    done_signal: str  # object the job writes when it ends, success or failure
    ordered: bool


class BatchOutcome(StrEnum):
    COMMITTED = "COMMITTED"
    SKIPPED = "SKIPPED"  # already committed by an earlier run: not applied again
    REPROCESSED = "REPROCESSED"  # committed once more on an operator's request (`turnstile reprocess`)
    REBUILT = "REBUILT"  # a derived step committed once more after a source changed (`protocol.rebuilds`)
    # Published without its audits on an operator's request (`turnstile publish`) after they failed.
    PUBLISHED_OVERRIDE = "PUBLISHED_OVERRIDE"
    FAILED = "FAILED"


# Outcomes whose batch is in the table (or was already): the table's position moves past it.
APPLIED_OUTCOMES = (BatchOutcome.COMMITTED, BatchOutcome.SKIPPED, BatchOutcome.PUBLISHED_OVERRIDE)
AUDIT_FAILURE = "audit"  # `BatchResult.error_kind` of a batch whose audits found offending rows


class ExpectationCount(BaseModel):
    """The rows of a batch that did not pass one of load.json's `expectations` (its check not TRUE):
    part of a `BatchResult`, not a record of its own."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    on_fail: str  # warn (loaded) | drop (not loaded, in `_failed/`) | fail (the batch failed)
    failed_rows: int


class BatchResult(Record):
    """Per batch, written by the job right after its commit (or its failure)."""

    job_id: str
    rel: str
    success_generation: int
    outcome: BatchOutcome
    rows_read: int = 0
    # Records the commit added (Iceberg's added-records; a copy-on-write MERGE also counts the rows
    # it rewrote unchanged).
    rows_written: int = 0
    bad_rows: int = 0
    bytes_read: int = 0
    seconds: float = 0.0
    snapshot_id: int | None = None
    time_min: str | None = None
    time_max: str | None = None
    error: str | None = None
    finished_at: AwareDatetime | None = None
    expectations: tuple[ExpectationCount, ...] = ()  # per expectation of load.json, in its order
    error_kind: str | None = None  # FAILED: `audit` when the batch's audits found offending rows
    published_by: str | None = None  # PUBLISHED_OVERRIDE: the operator who ran `turnstile publish`
    publish_reason: str | None = None  # and why
    # REBUILT (or SKIPPED: a retry that found the rebuild's commit): the source change it was for.
    cause: RebuildCause | None = None


class OpenJob(Record):
    """`<table>/_turnstile/open/<job>.json`: an unordered batch's job, from its submit until its end
    is handled; the sweeper's watchdog asks the runner about those that stay open too long."""

    job_id: str
    success: str  # the `_SUCCESS` object of the batch
    success_generation: int
    rel: str
    attempt: int = 0
    submitted_at: AwareDatetime
    cancel: CancelChoice | None = None  # `turnstile cancel`: what its end means (block or retry)
    ending_at: AwareDatetime | None = None  # when a handler of its failed end claimed it (`unordered`)


class HeldBatch(Record):
    """`<table>/_turnstile/held/<rel>/<generation>.json`: an unordered batch that arrived while the
    table was paused; `turnstile resume` (or the next sweep after it) submits its job."""

    success: str  # the `_SUCCESS` object of the batch
    success_generation: int
    rel: str
    held_at: AwareDatetime


class BatchFailure(Record):
    """`<table>/_turnstile/failures/<rel>/<generation>.json`: an unordered batch whose job failed.
    Transient failures are retried by the sweeper at `retry_at` until the attempts run out; the
    rest wait for `turnstile retry` after a fix. Removed when the batch is applied."""

    job_id: str
    success: str
    success_generation: int
    rel: str
    error: str
    transient: bool
    attempt: int  # attempts made so far
    retry_at: AwareDatetime | None = None  # None: no automatic retry left
    failed_at: AwareDatetime


class JobDone(Record):
    """The job's completion signal: its finalize event wakes the subscriber."""

    job_id: str
    succeeded: bool
    ordered: bool = True
    outcomes: dict[str, BatchOutcome] = Field(default_factory=dict)  # rel -> outcome, in order
    error: str | None = None
