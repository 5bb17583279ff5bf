"""Write-audit-publish: a table with audits gets each batch on its audit branch, audited against the
staged snapshot, then published to main, with real local Spark writing real Iceberg tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from turnstile.config.audits import BRANCH
from turnstile.core.clock import SystemClock
from turnstile.spark import audits
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.lexical import split_statements
from turnstile.state.execution import execute
from turnstile.state.records import BatchOutcome, BatchResult, Manifest, ManifestBatch
from turnstile.store.gcs import GcsStore

pytestmark = pytest.mark.spark

UNIQUE_ID = {"name": "unique_id", "sql": "SELECT id, count(*) AS n FROM ${staged} GROUP BY id HAVING n > 1"}
NO_NEGATIVE = {"name": "no_negative", "sql": "SELECT * FROM ${staged} WHERE amount < 0"}


def result(kit: Kit, batch: ManifestBatch) -> BatchResult:
    found = kit.store.read(batch.result)
    assert found is not None, f"no result record at {batch.result}"
    return BatchResult.decode(found.data, batch.result)


def refs(kit: Kit) -> dict[str, int]:
    return {r["name"]: r["snapshot_id"] for r in kit.spark.sql(f"SELECT * FROM {kit.table}.refs").collect()}


def main_batches(kit: Kit) -> list[str]:
    """The batch keys of main's snapshots, oldest first (main's ancestry)."""
    rows = kit.spark.sql(
        f"SELECT s.summary['turnstile.batch'] AS batch FROM {kit.table}.history h "
        f"JOIN {kit.table}.snapshots s ON h.snapshot_id = s.snapshot_id "
        "WHERE h.is_current_ancestor ORDER BY h.made_current_at"
    ).collect()
    return [r["batch"] for r in rows if r["batch"] is not None]


def staged_rows(kit: Kit) -> list[tuple[Any, ...]]:
    query = f"SELECT * FROM {kit.table} VERSION AS OF '{BRANCH}' ORDER BY 1"
    return [tuple(r) for r in kit.spark.sql(query).collect()]


def test_a_batch_that_passes_its_audits_is_published_to_main_with_its_tag(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID, NO_NEGATIVE])
    batch = kit.batch("1", csv("id,amount", "1,10", "2,5"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (2, 5)]
    got = result(kit, batch)
    assert got.outcome is BatchOutcome.COMMITTED
    assert main_batches(kit) == [f"1#{batch.success_generation}"]
    assert refs(kit) == {"main": got.snapshot_id, BRANCH: got.snapshot_id}  # published: main is the branch


def test_a_failing_audit_leaves_main_unchanged_and_names_the_audit_the_count_a_sample_and_a_query(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID, NO_NEGATIVE])
    first = kit.batch("1", csv("id,amount", "1,10"))
    assert kit.run(first).succeeded
    published = refs(kit)["main"]
    bad = kit.batch("2", csv("id,amount", "2,-5", "3,-7", "4,1"))
    done = kit.run(bad, job_id="job-2")
    assert not done.succeeded
    got = result(kit, bad)
    assert got.outcome is BatchOutcome.FAILED
    error = got.error or ""
    assert "the audit 'no_negative' (load.json audits[1]) found 2 offending row(s)" in error
    assert '{"id":2,"amount":-5}' in error and '{"id":3,"amount":-7}' in error
    staged = refs(kit)[BRANCH]
    assert f'turnstile query "SELECT * FROM {kit.table} VERSION AS OF {staged}"' in error
    assert error.endswith(
        f"to publish it as it is: turnstile publish gs://{gcs_store.bucket}/{bad.table_prefix}"
    )
    assert refs(kit)["main"] == published  # main unchanged: readers never see the batch
    assert kit.rows() == [(1, 10)]
    assert staged_rows(kit) == [(1, 10), (2, -5), (3, -7), (4, 1)]  # the branch holds it
    query = f"SELECT * FROM {kit.table} VERSION AS OF {staged} ORDER BY 1"
    assert len(spark.sql(query).collect()) == 4  # the error's query line reads the staged snapshot


def test_a_job_that_dies_between_the_branch_commit_and_the_publish_is_published_once_on_retry(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID])
    batch = kit.batch("1", csv("id,amount", "1,10", "2,5"))
    publish = audits.publish

    def dies(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the driver died")

    monkeypatch.setattr(audits, "publish", dies)
    with pytest.raises(RuntimeError, match="the driver died"):
        kit.run(batch)
    assert BRANCH in refs(kit) and "main" not in refs(kit)  # committed to the branch only
    assert kit.store.read(batch.result) is None
    audited: list[int] = []
    audit = audits.audit

    def counted(*args: Any, **kwargs: Any) -> None:
        audited.append(args[3])
        audit(*args, **kwargs)

    monkeypatch.setattr(audits, "publish", publish)
    monkeypatch.setattr(audits, "audit", counted)
    done = kit.run(batch, job_id="job-2")
    assert done.succeeded, done.error
    got = result(kit, batch)
    assert got.outcome is BatchOutcome.COMMITTED
    assert audited == [got.snapshot_id]  # audited again before its publish
    assert refs(kit)["main"] == got.snapshot_id
    assert kit.rows() == [(1, 10), (2, 5)]  # one commit: no row twice
    assert [s.get("turnstile.batch") for s in kit.snapshots()].count(f"1#{batch.success_generation}") == 1
    again = kit.run(batch, job_id="job-3")  # published already: skipped, as any committed batch
    assert again.outcomes == {"1": BatchOutcome.SKIPPED}
    assert kit.rows() == [(1, 10), (2, 5)]


def test_two_batches_of_one_job_are_each_audited_and_published_in_order(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID], mode="append")
    one = kit.batch("1", csv("id,amount", "1,10"))
    two = kit.batch("2", csv("id,amount", "2,20"))
    done = kit.run(one, two)
    assert done.succeeded, done.error
    assert main_batches(kit) == [f"1#{one.success_generation}", f"2#{two.success_generation}"]
    assert kit.rows() == [(1, 10), (2, 20)]
    assert refs(kit)["main"] == result(kit, two).snapshot_id


def test_a_cross_batch_audit_in_audit_sql_catches_a_key_repeated_by_a_later_batch(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store)
    text = (
        "-- no key twice in the table after the batch; a ';' in a comment or 'a;literal' splits nothing\n"
        "SELECT * FROM ${staged} WHERE amount IS NULL AND 'a;b' = 'a;b';\n"
        "SELECT id, count(*) AS n FROM ${staged} GROUP BY id HAVING n > 1;\n"
    )
    source = f"gs://{kit.bucket}/{kit.prefix}/_config/audit.sql"
    one = kit.batch("1", csv("id,amount", "1,10", "2,5")).model_copy(
        update={"audit_sql": text, "audit_source": source}
    )
    assert kit.run(one).succeeded
    two = kit.batch("2", csv("id,amount", "2,7", "3,1")).model_copy(
        update={"audit_sql": text, "audit_source": source}
    )
    done = kit.run(two, job_id="job-2")
    assert not done.succeeded
    error = result(kit, two).error or ""
    assert f"the audit 'audit.sql #2' (statement 2 of {source}) found 1 offending row(s)" in error
    assert '{"id":2,"n":2}' in error
    assert kit.rows() == [(1, 10), (2, 5)]  # main: the first batch only


def test_the_next_batch_discards_a_staged_batch_that_failed_its_audit(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    """What `turnstile unlock --skip-head` leads to: the next job's batch finds the branch ahead of
    main with another batch's commit, resets it to main, and only its own batch is published."""
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[NO_NEGATIVE])
    assert kit.run(kit.batch("1", csv("id,amount", "1,10"))).succeeded
    dropped = kit.batch("2", csv("id,amount", "2,-5"))
    assert not kit.run(dropped, job_id="job-2").succeeded
    after = kit.batch("3", csv("id,amount", "3,3"))
    done = kit.run(after, job_id="job-3")
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (3, 3)]
    assert staged_rows(kit) == [(1, 10), (3, 3)]
    assert f"2#{dropped.success_generation}" not in main_batches(kit)


def test_an_audit_that_is_not_a_query_fails_the_batch_without_running(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[{"name": "oops", "sql": "DELETE FROM ${staged}"}])
    batch = kit.batch("1", csv("id,amount", "1,10"))
    assert not kit.run(batch).succeeded
    error = result(kit, batch).error or ""
    assert "the audit 'oops' (load.json audits[0])" in error
    assert staged_rows(kit) == [(1, 10)]


def test_audit_sql_is_split_at_semicolons_outside_literals_and_comments() -> None:
    text = "SELECT ';' AS a; -- one; two\nSELECT `x;y` FROM t /* ; */;\n -- only a comment;\n ; "
    assert split_statements(text) == ["SELECT ';' AS a", "-- one; two\nSELECT `x;y` FROM t /* ; */"]


def test_audits_on_an_unordered_table_fail_the_batch_before_any_write(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID])
    batch = kit.batch("1", csv("id,amount", "1,10"))
    manifest = Manifest(
        job_id="job-1",
        bucket=kit.bucket,
        batches=(batch,),
        done_signal=f"{kit.prefix}/_turnstile/jobs/job-1.done",
        ordered=False,
    )
    applier = IcebergApplier(spark, "local", kit.staging, lambda bucket: kit.store, kit.bucket, ordered=False)
    done = execute(kit.store, manifest, applier, SystemClock())
    assert not done.succeeded
    assert "has audits but is not ordered" in (result(kit, batch).error or "")
    assert not spark.catalog.tableExists(kit.table)


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        ({"mode": "merge", "merge_keys": ["id"]}, [(1, 10), (2, 7), (3, 1)]),
        ({"mode": "overwrite"}, [(2, 7), (3, 1)]),
        ({"mode": "overwrite_partitions", "partition_by": ["id"]}, [(1, 10), (2, 7), (3, 1)]),
    ],
    ids=["merge", "overwrite", "overwrite_partitions"],
)
def test_every_write_mode_goes_through_the_branch_and_is_published(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, load: dict[str, Any], expected: list[tuple[int, int]]
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID], **load)
    one = kit.batch("1", csv("id,amount", "1,10", "2,5"))
    two = kit.batch("2", csv("id,amount", "2,7", "3,1"))
    done = kit.run(one, two)
    assert done.succeeded, done.error
    assert kit.rows() == expected
    assert main_batches(kit) == [f"1#{one.success_generation}", f"2#{two.success_generation}"]
    assert refs(kit)["main"] == result(kit, two).snapshot_id == refs(kit)[BRANCH]


def test_a_table_fixed_by_hand_after_a_failed_audit_gets_the_batch_written_again_on_top_of_the_fix(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[UNIQUE_ID])
    assert kit.run(kit.batch("1", csv("id,amount", "1,10", "2,5"))).succeeded
    two = kit.batch("2", csv("id,amount", "2,7", "3,1"))
    assert not kit.run(two, job_id="job-2").succeeded  # id 2 twice
    spark.sql(f"DELETE FROM {kit.table} WHERE id = 2")  # the operator's fix, on main
    done = kit.run(two, job_id="job-3")  # `turnstile unlock`
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (2, 7), (3, 1)]
    assert refs(kit)["main"] == result(kit, two).snapshot_id == refs(kit)[BRANCH]
    assert main_batches(kit)[-1] == f"2#{two.success_generation}"


def test_an_audit_returning_more_rows_than_the_sample_counts_them_all_and_shows_five(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    # The audit's rows are read once, five at most; they are counted only when there is one.
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[NO_NEGATIVE])
    bad = kit.batch("1", csv("id,amount", *[f"{i},-{i}" for i in range(1, 8)], "8,1"))
    done = kit.run(bad)
    assert not done.succeeded
    error = result(kit, bad).error or ""
    assert "the audit 'no_negative' (load.json audits[0]) found 7 offending row(s)" in error
    shown = error.split("First rows: ", 1)[1].split(". Read the staged table", 1)[0]
    assert len(shown.split("; ")) == audits.SAMPLE == 5
    assert "main" not in refs(kit)  # nothing published


def test_an_audit_over_batch_reads_the_rows_the_batch_added_not_the_whole_table(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    """`${batch}`: the rows of the data files the staged commit added. An id repeated across batches
    passes an audit of the batch; one repeated within the batch fails it."""
    within = {
        "name": "unique_in_batch",
        "sql": "SELECT id, count(*) AS n FROM ${batch} GROUP BY id HAVING n > 1",
    }
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[within])
    assert kit.run(kit.batch("1", csv("id,amount", "1,10", "2,5"))).succeeded
    done = kit.run(kit.batch("2", csv("id,amount", "2,7", "3,1")), job_id="job-2")
    assert done.succeeded, done.error
    assert sorted(kit.rows()) == [(1, 10), (2, 5), (2, 7), (3, 1)]
    bad = kit.batch("3", csv("id,amount", "4,1", "4,2", "5,3"))
    done = kit.run(bad, job_id="job-3")
    assert not done.succeeded
    error = result(kit, bad).error or ""
    assert "the audit 'unique_in_batch' (load.json audits[0]) found 1 offending row(s)" in error
    assert '{"id":4,"n":2}' in error
    assert len(kit.rows()) == 4  # main unchanged


def test_an_audit_over_batch_of_a_partitioned_table_sees_the_batch_columns_as_the_table_has_them(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    """The batch's data files sit in partition folders (`region=eu/`): `${batch}` has the table's
    columns, none made up from folder names, and exactly the batch's rows."""
    shape = {"name": "shape", "sql": "SELECT * FROM ${batch} WHERE region IS NULL OR id IS NULL"}
    count = {"name": "count", "sql": "SELECT n FROM (SELECT count(*) AS n FROM ${batch}) WHERE n <> 2"}
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[shape, count], partition_by=["region"])
    done = kit.run(kit.batch("1", csv("id,amount,region", "1,10,eu", "2,5,us")))
    assert done.succeeded, done.error
    columns = spark.sql(f"SELECT * FROM {audits.BATCH_VIEW}").columns
    assert columns == spark.table(kit.table).columns == ["id", "amount", "region"]
    bad = kit.batch("2", csv("id,amount,region", "3,1,eu"))
    done = kit.run(bad, job_id="job-2")
    assert not done.succeeded and "the audit 'count' (load.json audits[1]) found 1" in (
        result(kit, bad).error or ""
    )


def test_a_passing_audit_reads_every_partition_in_one_spark_job(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    """An audit that returns no row scans all its input anyway: its sample (a LIMIT) is one Spark
    job over every partition, not Spark's one partition first and then the rest in a second job."""
    positive = {"name": "positive", "sql": "SELECT * FROM ${batch} WHERE amount < 0"}
    kit = Kit(spark, tmp_path, store=gcs_store, audits=[positive], partition_by=["region"])
    batch = kit.batch("1", csv("id,amount,region", "1,10,eu", "2,5,us", "3,7,asia"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    snapshot = refs(kit)["main"]
    assert spark.read.table(f"{kit.table}.files").count() == 3  # three data files: three partitions
    context = spark.sparkContext
    context.setJobGroup("audit-jobs", "audit-jobs")
    try:
        audits.audit(spark, batch, kit.table, snapshot, {}, where="gs://bucket/ds/t")
    finally:
        context.setJobGroup("after-audit", "after-audit")
    assert len(context.statusTracker().getJobIdsForGroup("audit-jobs")) == 1
    assert spark.conf.get(audits.LIMIT_FIRST_PARTITIONS, None) is None  # the session's own again
