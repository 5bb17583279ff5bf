"""The JSON records kept in the bucket (turnstile.state.records): encode/decode, and errors naming
the object."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import ConfigError, Terminal
from turnstile.state.records import (
    BatchFailure,
    BatchOutcome,
    BatchResult,
    CancelChoice,
    Claim,
    ClaimState,
    CoveredBatch,
    Dependent,
    ExpectationCount,
    HeldBatch,
    JobDone,
    Lock,
    LockState,
    Manifest,
    ManifestBatch,
    MissingPeriod,
    OpenJob,
    Pause,
    Pointer,
    PublishOverride,
    RebuildCause,
    Record,
    ReprocessRequest,
    StaleStep,
    StepsPublished,
    Watermark,
)

T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
WHERE = "gs://bkt/ds/tbl/_bqlock"

COVER = CoveredBatch(
    rel="2024/01", pointer="ds/tbl/_backlog/2024/01/_SUCCESS", pointer_generation=7, success_generation=3
)
MANIFEST_BATCH = ManifestBatch(
    dataset="ds",
    table="tbl",
    table_prefix="ds/tbl",
    rel="2024/01",
    success_generation=3,
    data_uris=("gs://bkt/ds/tbl/2024/01/a.parquet", "gs://bkt/ds/tbl/2024/01/b.parquet"),
    load=LoadConfig(format="parquet", reader_options={"mergeSchema": True}, schema_="a INT, b STRING"),
    transform_sql="SELECT * FROM batch",
    config_digest="d1g",
    max_batches_per_job=4,
    result="ds/tbl/_turnstile/results/2024/01/3.json",
    failed_prefix="ds/tbl/_failed/2024/01/",
)

EXAMPLES: dict[str, Record] = {
    "lock-default": Lock(),
    "lock-running": Lock(
        state=LockState.RUNNING,
        job_id="turnstile-ds-tbl-0123456789abcdef",
        covers=(COVER, COVER.model_copy(update={"rel": "2024/02", "pointer_generation": 8})),
        manifest="gs://bkt/ds/tbl/_turnstile/jobs/j.manifest.json",
        acquired_at=T0,
        updated_at=T0 + timedelta(seconds=1),
        history=("j0", "j1"),
        position="2023/12",
        allow_late="ds/tbl/_backlog/2023/11/_SUCCESS",
        backfill_generation=99,
    ),
    "lock-failed": Lock(
        state=LockState.FAILED,
        job_id="j",
        covers=(COVER,),
        error='boom: ünïcode and "quotes"\nnewline',
        failed_rel="2024/01",
        unlock_command="turnstile unlock gs://bkt/ds/tbl",
        updated_at=T0,
    ),
    "claim-in-progress": Claim(state=ClaimState.IN_PROGRESS, owner="inv-1", expires_at=T0),
    "claim-done": Claim(state=ClaimState.DONE, owner="inv-2", expires_at=T0 + timedelta(days=1)),
    "pointer": Pointer(success="ds/tbl/2024/01/_SUCCESS", success_generation=2**62, published_at=T0),
    "manifest": Manifest(
        job_id="j",
        bucket="bkt",
        batches=(MANIFEST_BATCH, MANIFEST_BATCH.model_copy(update={"rel": "2024/02", "transform_sql": None})),
        done_signal="ds/tbl/_turnstile/jobs/j.done",
        ordered=True,
    ),
    "manifest-unordered-empty": Manifest(
        job_id="j", bucket="bkt", batches=(), done_signal="d", ordered=False
    ),
    "result-minimal": BatchResult(job_id="j", rel="", success_generation=1, outcome=BatchOutcome.SKIPPED),
    "result-full": BatchResult(
        job_id="j",
        rel="2024/01",
        success_generation=3,
        outcome=BatchOutcome.COMMITTED,
        rows_read=10,
        rows_written=9,
        bad_rows=1,
        bytes_read=1234,
        seconds=1.5,
        snapshot_id=8_000_000_000_000_000_000,
        time_min="2024-01-01T00:00:00Z",
        time_max="2024-01-31T23:59:59Z",
        finished_at=T0,
        expectations=(ExpectationCount(name="positive_amount", on_fail="drop", failed_rows=2),),
    ),
    "result-failed": BatchResult(
        job_id="j", rel="x", success_generation=1, outcome=BatchOutcome.FAILED, error="bad rows"
    ),
    "done-succeeded": JobDone(
        job_id="j",
        succeeded=True,
        outcomes={"2024/03": BatchOutcome.SKIPPED, "2024/01": BatchOutcome.COMMITTED},
    ),
    "done-failed-unordered": JobDone(
        job_id="j",
        succeeded=False,
        ordered=False,
        outcomes={"a": BatchOutcome.FAILED},
        error="batch 'a': boom",
    ),
    "lock-retrying": Lock(
        position="2024/01", attempt=2, retry_at=T0 + timedelta(minutes=2), last_error="the job died"
    ),
    "held": HeldBatch(success="ds/tbl/a/_SUCCESS", success_generation=4, rel="a", held_at=T0),
    "open-job": OpenJob(
        job_id="j", success="ds/tbl/a/_SUCCESS", success_generation=4, rel="a", attempt=1, submitted_at=T0
    ),
    "failure-transient": BatchFailure(
        job_id="j",
        success="ds/tbl/a/_SUCCESS",
        success_generation=4,
        rel="a",
        error="the job died",
        transient=True,
        attempt=1,
        retry_at=T0 + timedelta(minutes=1),
        failed_at=T0,
    ),
    "pause": Pause(reason="a schema change upstream", at=T0),
    "publish-override": PublishOverride(by="ana", reason="known refunds", at=T0),
    "lock-cancelled": Lock(state=LockState.RUNNING, job_id="j", cancel=CancelChoice.REQUEUE),
    "watermark": Watermark(
        watermark=T0.replace(minute=0, second=0, microsecond=0), rel="2024/05/01/11", updated_at=T0
    ),
    "watermark-gap": Watermark(
        watermark=T0.replace(hour=11, minute=0, second=0, microsecond=0),
        rel="2024/05/01/12",
        updated_at=T0,
        ahead=(
            (
                T0.replace(hour=12, minute=0, second=0, microsecond=0),
                T0.replace(hour=13, minute=0, second=0, microsecond=0),
            ),
        ),
        last=T0.replace(hour=13, minute=0, second=0, microsecond=0),
        gap_since=T0,
    ),
    "missing-period": MissingPeriod(
        period="2024/05/01/11",
        start=T0.replace(hour=11, minute=0, second=0, microsecond=0),
        reason="offline",
        at=T0,
    ),
    "steps-published": StepsPublished(through=T0.replace(minute=0, second=0, microsecond=0), updated_at=T0),
    "dependent": Dependent(table="ds/fact"),
    "stale-step": StaleStep(
        rel="2024/05/01/11",
        cause=RebuildCause(table="ds/src", rel="2024/05/01/11", success_generation=7, reprocess="r1", at=T0),
        at=T0,
    ),
    "result-rebuilt": BatchResult(
        job_id="j",
        rel="2024/05/01/11",
        success_generation=1,
        outcome=BatchOutcome.REBUILT,
        cause=RebuildCause(table="ds/src", rel="2024/05/01/11", success_generation=7, at=T0),
    ),
}

RECORD_TYPES = [
    Lock,
    Claim,
    Pointer,
    Manifest,
    BatchResult,
    JobDone,
    HeldBatch,
    OpenJob,
    BatchFailure,
    Pause,
    PublishOverride,
    Watermark,
    MissingPeriod,
    StepsPublished,
    Dependent,
    StaleStep,
]


def test_examples_cover_every_record_type() -> None:
    assert {type(r) for r in EXAMPLES.values()} == set(RECORD_TYPES)
    # This module's records (the spool's, in turnstile.state.spoolrecords, have tests of their own).
    here = {c for c in Record.__subclasses__() if c.__module__ == Record.__module__}
    assert here == set(RECORD_TYPES)


def test_a_rebuild_request_keeps_its_cause_and_an_operators_has_none() -> None:
    cause = RebuildCause(table="ds/src", rel="2024/05/01/11", success_generation=7, reprocess="r1", at=T0)
    request = ReprocessRequest(
        success="ds/fact/2024/05/01/11/_SUCCESS",
        success_generation=1,
        published_at=T0,
        rel="2024/05/01/11",
        requested_at=T0,
        cause=cause,
    )
    assert ReprocessRequest.decode(request.encode(), WHERE).cause == cause
    written_before = json.dumps({k: v for k, v in json.loads(request.encode()).items() if k != "cause"})
    assert ReprocessRequest.decode(written_before.encode(), WHERE).cause is None


@pytest.mark.parametrize("record", list(EXAMPLES.values()), ids=list(EXAMPLES))
def test_round_trip(record: Record) -> None:
    data = record.encode()
    assert isinstance(data, bytes)
    json.loads(data)  # plain JSON that any tool reads
    back = type(record).decode(data, WHERE)
    assert back == record
    assert back.encode() == data  # stable bytes


def test_round_trip_keeps_datetimes_aware_and_outcome_order() -> None:
    done = EXAMPLES["done-succeeded"]
    assert isinstance(done, JobDone)
    assert list(JobDone.decode(done.encode(), WHERE).outcomes) == ["2024/03", "2024/01"]
    lock = Lock.decode(EXAMPLES["lock-running"].encode(), WHERE)
    assert lock.acquired_at == T0
    assert lock.acquired_at is not None and lock.acquired_at.tzinfo is not None


def test_decode_ignores_unknown_fields() -> None:
    data = json.loads(EXAMPLES["claim-done"].encode())
    data["added_in_a_later_version"] = 1
    assert Claim.decode(json.dumps(data).encode(), WHERE) == EXAMPLES["claim-done"]


@pytest.mark.parametrize(
    "content",
    [b"", b"{}", b'{"job_id": "gcf-ingest-x", "table": {"tableId": "t"}}', b'{"job_id": "manual"}'],
    ids=["empty", "empty-object", "original-loader", "manual"],
)
def test_a_lock_turnstile_did_not_write_is_rejected_not_free(content: bytes) -> None:
    with pytest.raises(ConfigError, match=f"{WHERE} does not hold a turnstile lock"):
        Lock.decode(content, WHERE)


def test_the_original_loaders_lock_is_named() -> None:
    with pytest.raises(ConfigError, match="gcs_ocn_bq_ingest's lock \\(job 'gcf-ingest-x'\\)"):
        Lock.decode(b'{"job_id": "gcf-ingest-x", "table": {"tableId": "t"}}', WHERE)


def test_every_lock_turnstile_writes_decodes() -> None:
    assert Lock.decode(Lock().encode(), WHERE) == Lock()
    assert Lock.decode(b'{"state": "FREE"}', WHERE) == Lock()


@pytest.mark.parametrize("record_type", [Claim, Pointer, Manifest, BatchResult, JobDone])
def test_empty_content_of_a_record_with_required_fields_is_rejected(record_type: type[Record]) -> None:
    with pytest.raises(ConfigError, match=WHERE):
        record_type.decode(b"", WHERE)


GARBAGE = [
    b"not json",
    b"\xff\xfe\x00binary",
    b"[1, 2]",
    b"null",
    b'"a string"',
    b'{"state": "EXPLODED", "success_generation": "many", "job_id": 5, "outcome": "MEH"}',
]


@pytest.mark.parametrize("data", GARBAGE)
@pytest.mark.parametrize("record_type", RECORD_TYPES, ids=lambda t: t.__name__)
def test_decode_of_garbage_names_the_object(record_type: type[Record], data: bytes) -> None:
    where = "gs://bkt/ds/tbl/_turnstile/some/object.json"
    with pytest.raises(ConfigError) as caught:
        record_type.decode(data, where)
    message = str(caught.value)
    assert where in message
    assert record_type.__name__.lower() in message
    assert isinstance(caught.value, Terminal)
    assert isinstance(caught.value.__cause__, ValidationError)


def test_decode_error_says_what_is_wrong() -> None:
    with pytest.raises(ConfigError, match="IN_PROGRESS"):
        Claim.decode(b'{"state": "MAYBE", "owner": "x", "expires_at": "2024-01-01T00:00:00Z"}', WHERE)


def test_records_are_frozen() -> None:
    with pytest.raises(ValidationError):
        EXAMPLES["claim-done"].owner = "someone else"  # type: ignore[misc]


text = st.text(max_size=20)
generations = st.integers(min_value=0, max_value=2**63 - 1)
aware = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(9999, 1, 1), timezones=st.just(UTC))
covers = st.builds(
    CoveredBatch, rel=text, pointer=text, pointer_generation=generations, success_generation=generations
)


@given(
    st.builds(
        Lock,
        state=st.sampled_from(LockState),
        job_id=st.none() | text,
        covers=st.lists(covers, max_size=3).map(tuple),
        updated_at=st.none() | aware,
        error=st.none() | text,
        history=st.lists(text, max_size=3).map(tuple),
        backfill_generation=st.none() | generations,
    )
)
def test_any_lock_round_trips(lock: Lock) -> None:
    assert Lock.decode(lock.encode(), WHERE) == lock


@given(
    st.builds(
        JobDone,
        job_id=text,
        succeeded=st.booleans(),
        ordered=st.booleans(),
        outcomes=st.dictionaries(text, st.sampled_from(BatchOutcome), max_size=5),
        error=st.none() | text,
    )
)
def test_any_job_done_round_trips_in_order(done: JobDone) -> None:
    back = JobDone.decode(done.encode(), WHERE)
    assert back == done
    assert list(back.outcomes) == list(done.outcomes)


def test_a_manifest_carries_the_load_config_with_the_load_json_keys() -> None:
    batch = MANIFEST_BATCH.model_copy(
        update={
            "load": LoadConfig.model_validate({"schema": "id INT", "destinationRegex": "^(?P<dataset>x)/"})
        }
    )
    load = json.loads(batch.model_dump_json())["load"]
    assert (load["schema"], load["destinationRegex"]) == ("id INT", "^(?P<dataset>x)/")
    assert "schema_" not in load and "destination_regex" not in load
    decoded = ManifestBatch.model_validate_json(batch.model_dump_json())
    assert isinstance(decoded.load, LoadConfig) and decoded == batch


def test_a_manifest_with_an_unknown_load_key_is_refused() -> None:
    data = json.loads(MANIFEST_BATCH.model_dump_json())
    data["load"]["colums"] = ["a"]
    with pytest.raises(ValidationError, match="colums"):
        ManifestBatch.model_validate(data)


def test_a_time_step_batch_carries_its_window_in_utc() -> None:
    start = datetime(2026, 1, 1, 3, tzinfo=UTC)
    step = MANIFEST_BATCH.model_copy(
        update={"data_uris": (), "window_start": start, "window_end": start + timedelta(hours=1)}
    )
    decoded = ManifestBatch.model_validate_json(step.model_dump_json())
    assert (decoded.window_start, decoded.window_end) == (start, start + timedelta(hours=1))
    assert MANIFEST_BATCH.window_start is None and MANIFEST_BATCH.window_end is None


def test_a_window_without_a_time_zone_is_refused() -> None:
    data = json.loads(MANIFEST_BATCH.model_dump_json())
    data["window_start"] = "2026-01-01T03:00:00"
    with pytest.raises(ValidationError, match="window_start"):
        ManifestBatch.model_validate(data)
