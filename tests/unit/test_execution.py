"""The bucket side of a job (turnstile.state.execution) over an in-memory table (MemoryTables)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import BatchFailed, CorruptRecord, Terminal, Transient, TurnstileError
from turnstile.jobs.inline import MemoryTables
from turnstile.names.paths import Table
from turnstile.names.publishing import override_name
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import (
    BatchOutcome,
    BatchResult,
    JobDone,
    Manifest,
    ManifestBatch,
    PublishOverride,
    RebuildCause,
)
from turnstile.store.memory import MemoryStore
from turnstile.store.recording import RecordingStore

BUCKET = "bkt"
TABLE = Table(BUCKET, "ds/tbl", "ds", "tbl")
JOB = "turnstile-ds-tbl-0123456789abcdef"
NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
COMMITTED, SKIPPED, FAILED = BatchOutcome.COMMITTED, BatchOutcome.SKIPPED, BatchOutcome.FAILED


class FixedClock:
    def now(self) -> datetime:
        return NOW

    def sleep(self, seconds: float) -> None:
        raise AssertionError("execute never sleeps")


def mbatch(rel: str, generation: int = 1, n_files: int = 2) -> ManifestBatch:
    return ManifestBatch(
        dataset="ds",
        table="tbl",
        table_prefix=TABLE.prefix,
        rel=rel,
        success_generation=generation,
        data_uris=tuple(f"gs://{BUCKET}/ds/tbl/{rel}/part-{i}.parquet" for i in range(n_files)),
        load={"format": "parquet"},
        config_digest="abc",
        result=TABLE.result(rel, generation),
        failed_prefix=TABLE.failed_rows(rel),
    )


def manifest(*batches: ManifestBatch, ordered: bool = True) -> Manifest:
    return Manifest(
        job_id=JOB, bucket=BUCKET, batches=batches, done_signal=TABLE.done_signal(JOB), ordered=ordered
    )


class Recorded:
    """A store that remembers the order of its writes."""

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.store = RecordingStore(MemoryStore(BUCKET), lambda name, _gen: self.writes.append(name))

    def result(self, batch: ManifestBatch) -> BatchResult | None:
        found = self.store.read(batch.result)
        return None if found is None else BatchResult.decode(found.data, batch.result)

    def done(self) -> JobDone:
        found = self.store.read(TABLE.done_signal(JOB))
        assert found is not None
        return JobDone.decode(found.data, "done")


def run(m: Manifest, tables: MemoryTables | None = None) -> tuple[JobDone, Recorded, MemoryTables]:
    recorded, tables = Recorded(), tables or MemoryTables()
    done = execute(recorded.store, m, tables, FixedClock())
    return done, recorded, tables


def test_all_batches_committed_in_order_with_one_result_each() -> None:
    batches = (mbatch("b1", 11, 1), mbatch("b2", 12, 2), mbatch("b3", 13, 3))
    done, recorded, tables = run(manifest(*batches))
    assert recorded.writes == [b.result for b in batches] + [TABLE.done_signal(JOB)]
    assert tables.commits == {"ds/tbl": [("b1", 11), ("b2", 12), ("b3", 13)]}
    for b in batches:
        result = recorded.result(b)
        assert result is not None
        assert (result.job_id, result.rel, result.success_generation) == (JOB, b.rel, b.success_generation)
        assert result.outcome is COMMITTED
        assert result.rows_read == len(b.data_uris)
        assert result.finished_at == NOW
        assert result.seconds >= 0
        assert result.error is None
    assert done == JobDone(
        job_id=JOB, succeeded=True, ordered=True, outcomes={"b1": COMMITTED, "b2": COMMITTED, "b3": COMMITTED}
    )
    assert recorded.done() == done


def test_a_stop_asked_while_it_runs_ends_the_job_at_the_next_batch_boundary() -> None:
    """A cancel of a job a warm driver runs: the batch under way is committed and recorded, the
    next is not started and has no record (the protocol applies it again, or blocks on it)."""
    batches = (mbatch("b1"), mbatch("b2"), mbatch("b3"))
    recorded, tables = Recorded(), MemoryTables()
    done = execute(recorded.store, manifest(*batches), tables, FixedClock(), lambda: bool(tables.commits))
    assert tables.commits == {"ds/tbl": [("b1", 1)]}
    assert recorded.writes == [batches[0].result, TABLE.done_signal(JOB)]
    assert not done.succeeded and done.outcomes == {"b1": COMMITTED}
    assert done.error == "cancelled: stopped at a batch boundary, before batch 'b2'"


def test_stops_at_the_first_failure() -> None:
    batches = (mbatch("b1"), mbatch("b2"), mbatch("b3"))
    tables = MemoryTables(failing={"b2", "b3"})
    done, recorded, tables = run(manifest(*batches), tables)
    assert recorded.writes == [batches[0].result, batches[1].result, TABLE.done_signal(JOB)]
    assert tables.applied_rels("ds/tbl") == ["b1"]
    failed = recorded.result(batches[1])
    assert failed is not None
    assert failed.outcome is FAILED
    assert failed.error == "injected failure of 'b2'"
    assert failed.finished_at == NOW
    assert recorded.result(batches[2]) is None  # never attempted
    assert done.succeeded is False
    assert done.outcomes == {"b1": COMMITTED, "b2": FAILED}
    assert done.error is not None
    assert "'b2'" in done.error and "injected failure" in done.error
    assert recorded.done() == done


def test_failure_of_the_first_batch_applies_nothing() -> None:
    done, recorded, tables = run(manifest(mbatch("b1"), mbatch("b2")), MemoryTables(failing={"b1"}))
    assert tables.commits == {}
    assert done.outcomes == {"b1": FAILED}
    assert not done.succeeded
    assert recorded.writes == [mbatch("b1").result, TABLE.done_signal(JOB)]


def test_already_applied_batch_is_skipped_not_applied_again() -> None:
    tables = MemoryTables(commits={"ds/tbl": [("b1", 11)]})
    batches = (mbatch("b1", 11), mbatch("b2", 12))
    done, recorded, tables = run(manifest(*batches), tables)
    assert tables.commits == {"ds/tbl": [("b1", 11), ("b2", 12)]}  # b1 not committed twice
    skipped = recorded.result(batches[0])
    assert skipped is not None
    assert skipped.outcome is SKIPPED
    assert (skipped.job_id, skipped.rel, skipped.success_generation) == (JOB, "b1", 11)
    assert skipped.finished_at == NOW
    assert done.succeeded
    assert done.outcomes == {"b1": SKIPPED, "b2": COMMITTED}


def test_skip_wins_over_an_injected_failure() -> None:
    # An already-committed batch is never re-applied, so it cannot fail again.
    tables = MemoryTables(commits={"ds/tbl": [("b1", 11)]}, failing={"b1"})
    done, _, _ = run(manifest(mbatch("b1", 11)), tables)
    assert done.succeeded and done.outcomes == {"b1": SKIPPED}


def test_another_generation_of_an_applied_rel_is_applied_again() -> None:
    tables = MemoryTables(commits={"ds/tbl": [("b1", 11)]})
    done, _, tables = run(manifest(mbatch("b1", 12)), tables)
    assert done.outcomes == {"b1": COMMITTED}
    assert tables.commits == {"ds/tbl": [("b1", 11), ("b1", 12)]}


def test_commits_of_other_tables_do_not_cause_skips() -> None:
    tables = MemoryTables(commits={"ds/other": [("b1", 11)]})
    done, _, _ = run(manifest(mbatch("b1", 11)), tables)
    assert done.outcomes == {"b1": COMMITTED}


def test_done_signal_keeps_the_manifest_order_of_outcomes() -> None:
    rels = ["2024/03", "2024/01", "2024/02"]  # whatever order the manifest says, not sorted
    done, recorded, _ = run(manifest(*(mbatch(r) for r in rels)))
    assert list(done.outcomes) == rels
    assert list(recorded.done().outcomes) == rels


@pytest.mark.parametrize("ordered", [True, False])
def test_done_signal_carries_the_ordered_flag(ordered: bool) -> None:
    done, recorded, _ = run(manifest(mbatch("b1"), ordered=ordered))
    assert done.ordered is ordered
    assert recorded.done().ordered is ordered
    assert recorded.done().job_id == JOB


def test_empty_manifest_succeeds_with_no_outcomes() -> None:
    done, recorded, _ = run(manifest())
    assert done == JobDone(job_id=JOB, succeeded=True, ordered=True, outcomes={}, error=None)
    assert recorded.writes == [TABLE.done_signal(JOB)]


def test_read_manifest_round_trip_and_missing() -> None:
    store = MemoryStore(BUCKET)
    m = manifest(mbatch("b1"), mbatch("b2"))
    uri = f"gs://{BUCKET}/{TABLE.manifest(JOB)}"
    with pytest.raises(BatchFailed, match="does not exist"):
        read_manifest(store, uri)
    store.write(TABLE.manifest(JOB), m.encode())
    assert read_manifest(store, uri) == m


def test_batch_failures_are_terminal_turnstile_errors() -> None:
    failed = BatchFailed("bad data")
    assert isinstance(failed, TurnstileError) and isinstance(failed, Terminal)
    assert not isinstance(failed, Transient)
    corrupt = CorruptRecord("2 row(s) could not be parsed", column="price", value="12,5")
    assert isinstance(corrupt, BatchFailed)
    assert (str(corrupt), corrupt.column, corrupt.value) == ("2 row(s) could not be parsed", "price", "12,5")
    assert (CorruptRecord("unknown where").column, CorruptRecord("unknown where").value) == (None, None)


class CorruptSecond(MemoryTables):
    """An applier whose second batch holds rows that do not fit the schema."""

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        if batch.rel == "b2":
            raise CorruptRecord("1 row(s) could not be parsed", value="not,a,row")
        return super().apply(batch, job_id)


def test_a_corrupt_record_fails_its_batch_and_stops_the_job_with_its_message() -> None:
    store = MemoryStore(BUCKET)
    tables = CorruptSecond()
    done = execute(store, manifest(mbatch("b1"), mbatch("b2"), mbatch("b3")), tables, FixedClock())
    assert not done.succeeded
    assert done.outcomes == {"b1": BatchOutcome.COMMITTED, "b2": BatchOutcome.FAILED}
    assert done.error == "batch 'b2': 1 row(s) could not be parsed"
    assert tables.applied_rels(TABLE.prefix) == ["b1"]


class ReturnsFailed(MemoryTables):
    """An applier that reports a failure by returning a FAILED result instead of raising."""

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        return BatchResult(
            job_id=job_id,
            rel=batch.rel,
            success_generation=batch.success_generation,
            outcome=BatchOutcome.FAILED,
            error="returned, not raised",
        )


def test_a_returned_failed_result_still_stops_the_job() -> None:
    done, recorded, _ = run(manifest(mbatch("b1"), mbatch("b2")), ReturnsFailed())
    assert done.outcomes == {"b1": FAILED}
    assert recorded.result(mbatch("b2")) is None


def test_a_returned_failed_result_is_not_reported_as_success() -> None:
    done, _, _ = run(manifest(mbatch("b1"), mbatch("b2")), ReturnsFailed())
    assert done.succeeded is False
    assert done.error is not None and "'b1'" in done.error


# The history never loses a commit


def run_on(recorded: Recorded, m: Manifest, tables: MemoryTables) -> JobDone:
    return execute(recorded.store, m, tables, FixedClock())


def test_a_skipped_attempt_keeps_the_committed_record_of_its_batch() -> None:
    recorded, tables = Recorded(), MemoryTables()
    run_on(recorded, manifest(mbatch("b1", 11)), tables)
    first = recorded.result(mbatch("b1", 11))
    assert first is not None and first.outcome is COMMITTED
    again = run_on(recorded, manifest(mbatch("b1", 11)), tables)  # a retried job covers it again
    assert again.outcomes == {"b1": SKIPPED}
    assert recorded.result(mbatch("b1", 11)) == first


def test_a_skipped_batch_without_a_record_is_recorded_with_the_commit_it_found() -> None:
    """The attempt that committed died before its record: the next one records the commit."""
    recorded = Recorded()
    done = run_on(
        recorded, manifest(mbatch("b1", 11)), MemoryTables(commits={"ds/tbl": [("b0", 1), ("b1", 11)]})
    )
    assert done.outcomes == {"b1": SKIPPED}
    skipped = recorded.result(mbatch("b1", 11))
    assert skipped is not None and skipped.outcome is SKIPPED and skipped.snapshot_id == 2


def test_a_rebuild_whose_commit_a_dead_attempt_made_is_recorded_skipped_with_its_cause() -> None:
    cause = RebuildCause(table="ds/src", rel="b1", success_generation=3, at=datetime(2026, 1, 1, tzinfo=UTC))
    rebuild = mbatch("b1", 11).model_copy(
        update={
            "reprocess": "r1-rebuild-0",
            "rebuild": cause,
            "result": "ds/tbl/_turnstile/results/b1/r.json",
        }
    )
    tables = MemoryTables(
        commits={"ds/tbl": [("b1", 11), ("b1", 11)]}, reprocessed={("ds/tbl", "r1-rebuild-0")}
    )
    recorded = Recorded()
    assert run_on(recorded, manifest(rebuild), tables).outcomes == {"b1": SKIPPED}
    found = recorded.result(rebuild)
    assert found is not None and found.outcome is SKIPPED and found.snapshot_id == 2
    assert found.cause == cause  # the history still names the source change


def test_a_skipped_attempt_replaces_a_failed_record() -> None:
    """The commit landed but the attempt reported a failure (it died finding its commit)."""
    recorded = Recorded()
    failed = BatchResult(job_id="earlier", rel="b1", success_generation=11, outcome=FAILED, error="lost")
    recorded.store.write(mbatch("b1", 11).result, failed.encode())
    run_on(recorded, manifest(mbatch("b1", 11)), MemoryTables(commits={"ds/tbl": [("b1", 11)]}))
    replaced = recorded.result(mbatch("b1", 11))
    assert replaced is not None and replaced.outcome is SKIPPED and replaced.snapshot_id == 1


class Seen(MemoryTables):
    """Remembers the batches the job hands it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ManifestBatch] = []

    def apply(self, batch: ManifestBatch, job_id: str) -> BatchResult:
        self.seen.append(batch)
        return super().apply(batch, job_id)


def audited(rel: str, generation: int, reprocess: str | None = None) -> ManifestBatch:
    load = {"format": "parquet", "audits": [{"name": "no_negative", "sql": "SELECT 1 WHERE false"}]}
    return mbatch(rel, generation).model_copy(
        update={"load": LoadConfig.model_validate(load), "reprocess": reprocess}
    )


def test_the_job_hands_a_published_batch_its_publish_record_but_not_a_later_reprocess_of_it() -> None:
    recorded, tables = Recorded(), Seen()
    override = PublishOverride(by="ana", reason="known refunds", at=NOW)
    recorded.store.write(override_name(TABLE.prefix, "b1", 11), override.encode())
    run_on(recorded, manifest(audited("b1", 11)), tables)
    run_on(recorded, manifest(audited("b1", 11, reprocess="r1")), tables)
    assert [b.publish_override for b in tables.seen] == [override, None]
