"""The PySpark job end to end on local Iceberg: formats, write modes, exactly-once, bad rows, schema
evolution, transforms, failures, result records and commit tags.

Each test uses its own table (a `Kit`) in the session's `local` catalog and runs manifests through
`turnstile.state.execution.execute` with the real `IcebergApplier`. Batches cost about a second
each, so each test applies as few as its point needs.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import ParseException

from tests.spark.jobkit import BUCKET, Kit, csv
from turnstile.config.cascade import ConfigReader
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import CorruptRecord
from turnstile.names.paths import parse_success
from turnstile.ops.session import NoRunner
from turnstile.protocol.context import Invocation
from turnstile.protocol.manifests import manifest_batch
from turnstile.spark import commits, lexical, statements
from turnstile.spark.applier import IcebergApplier
from turnstile.state.records import BatchOutcome, BatchResult, JobDone, ManifestBatch

pytestmark = pytest.mark.spark

COMMITTED, SKIPPED, FAILED = BatchOutcome.COMMITTED, BatchOutcome.SKIPPED, BatchOutcome.FAILED


# --- helpers ------------------------------------------------------------------------------------
def result(kit: Kit, batch: ManifestBatch) -> BatchResult:
    found = kit.store.read(batch.result)
    assert found is not None, f"no result record at {batch.result}"
    return BatchResult.decode(found.data, batch.result)


def done_signal(kit: Kit, job_id: str) -> JobDone | None:
    found = kit.store.read(f"{kit.prefix}/_turnstile/jobs/{job_id}.done")
    return None if found is None else JobDone.decode(found.data, job_id)


def outcomes(done: JobDone) -> list[tuple[str, BatchOutcome]]:
    return list(done.outcomes.items())


def tagged(kit: Kit) -> dict[str, tuple[int, dict[str, str]]]:
    """turnstile.batch -> (snapshot id, summary plus `operation`), over every snapshot of the
    table, oldest first; fails on an untagged snapshot or a batch committed twice."""
    rows = kit.spark.sql(
        f"SELECT snapshot_id, operation, summary FROM {kit.table}.snapshots ORDER BY committed_at"
    ).collect()
    found: dict[str, tuple[int, dict[str, str]]] = {}
    for row in rows:
        summary = dict(row["summary"]) | {"operation": row["operation"]}
        key = summary.get(commits.BATCH_KEY)
        assert key is not None, f"an untagged commit in {kit.table}: {summary}"
        assert key not in found, f"{key} committed twice"
        found[key] = (int(row["snapshot_id"]), summary)
    return found


def key(batch: ManifestBatch) -> str:
    return f"{batch.rel}#{batch.success_generation}"


def assert_tagged(kit: Kit, batch: ManifestBatch, job_id: str) -> dict[str, str]:
    """The batch's one commit carries every turnstile.* property; returns its summary."""
    snapshot, summary = tagged(kit)[key(batch)]
    assert summary["turnstile.batch"] == key(batch)
    assert summary["turnstile.rel"] == batch.rel
    assert summary["turnstile.success-generation"] == str(batch.success_generation)
    assert summary["turnstile.config.cascade-digest"] == batch.config_digest
    assert summary["turnstile.job-id"] == job_id
    assert summary["turnstile.position"] == batch.rel
    assert summary["turnstile.table"] == kit.prefix
    assert result(kit, batch).snapshot_id == snapshot
    return summary


def columns(kit: Kit) -> dict[str, str]:
    """Column -> Spark type, from DESCRIBE (up to its partitioning section)."""
    found: dict[str, str] = {}
    for row in kit.spark.sql(f"DESCRIBE TABLE {kit.table}").collect():
        if not row["col_name"] or row["col_name"].startswith("#"):
            break
        found[row["col_name"]] = row["data_type"]
    return found


def spark_file(
    spark: Any, folder: Path, fmt: str, rows: list[tuple[Any, ...]], ddl: str
) -> tuple[str, bytes]:
    """A real parquet/orc file: Spark writes a tiny DataFrame, we read its one part file back."""
    out = folder / f"written-{fmt}"
    spark.createDataFrame(rows, ddl).coalesce(1).write.format(fmt).save(str(out))
    (part,) = [p for p in out.iterdir() if p.name.startswith("part-")]
    return part.name, part.read_bytes()


# --- 1. formats ---------------------------------------------------------------------------------
SMALL = [(1, "a", 10), (2, "b", 20)]
SMALL_DDL = "id INT, v STRING, n SMALLINT"  # smallint: Iceberg stores it as int
FileMaker = Callable[[Any, Path], tuple[str, bytes]]
Format = tuple[str, dict[str, Any], FileMaker, list[tuple[Any, ...]], dict[str, str]]  # id, load, ...

FORMATS: list[Format] = [
    (
        "csv-explicit-schema",
        {"format": "csv", "schema": "id BIGINT, v STRING"},
        lambda spark, tmp: csv("id,v", "1,a", "2,b"),
        [(1, "a"), (2, "b")],
        {"id": "bigint", "v": "string"},
    ),
    (
        "csv-gz",
        {"format": "csv"},
        lambda spark, tmp: ("part-0.csv.gz", gzip.compress(b"id,v\n1,a\n2,b\n")),
        [(1, "a"), (2, "b")],
        {"id": "int", "v": "string"},
    ),
    (
        "csv-delimiter",
        {"format": "csv", "reader_options": {"delimiter": ";"}},
        lambda spark, tmp: csv("id;v", "1;a,x", "2;b"),
        [(1, "a,x"), (2, "b")],
        {"id": "int", "v": "string"},
    ),
    (
        "json",
        {"format": "json"},
        lambda spark, tmp: ("part-0.json", b'{"id": 1, "v": "a"}\n{"id": 2, "v": "b"}\n'),
        [(1, "a"), (2, "b")],
        {"id": "bigint", "v": "string"},
    ),
    (
        "jsonl-explicit-schema",
        {"format": "jsonl", "schema": "id INT, v STRING"},
        lambda spark, tmp: ("part-0.jsonl", b'{"id": 1, "v": "a"}\n{"v": "b", "id": 2}\n'),
        [(1, "a"), (2, "b")],
        {"id": "int", "v": "string"},
    ),
    (
        "parquet",
        {"format": "parquet"},
        lambda spark, tmp: spark_file(spark, tmp, "parquet", SMALL, SMALL_DDL),
        SMALL,
        {"id": "int", "v": "string", "n": "int"},
    ),
    (
        "orc",
        {"format": "orc"},
        lambda spark, tmp: spark_file(spark, tmp, "orc", SMALL, SMALL_DDL),
        SMALL,
        {"id": "int", "v": "string", "n": "int"},
    ),
    (
        "text",
        {"format": "text"},
        lambda spark, tmp: ("part-0.txt", b"first line\nsecond, with a comma\n"),
        [("first line",), ("second, with a comma",)],
        {"value": "string"},
    ),
]


@pytest.mark.parametrize("case", [pytest.param(f, id=f[0]) for f in FORMATS])
def test_each_format_is_read_and_committed(spark: Any, tmp_path: Path, case: Format) -> None:
    _, load, make, expected, types = case
    kit = Kit(spark, tmp_path, **load)
    name, data = make(spark, tmp_path)
    batch = kit.batch("2024/05/01/13", (name, data))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == expected
    assert columns(kit) == types
    got = result(kit, batch)
    assert (got.outcome, got.rows_read, got.rows_written, got.bytes_read) == (
        COMMITTED,
        len(expected),
        len(expected),
        len(data),
    )


# --- 2. modes -----------------------------------------------------------------------------------
def test_first_batch_creates_the_table_with_partitions_and_properties_and_results_are_recorded(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        schema="id INT, ts TIMESTAMP, v STRING",
        partition_by=["days(ts)"],
        table_properties={"turnstile.owner": "tests", "commit.retry.num-retries": "7"},
        time_column="ts",
    )
    first = csv("id,ts,v", "1,2024-05-01T13:05:00Z,a", "2,2024-05-02T01:00:00Z,b", "3,2024-05-01T23:59:59Z,c")
    b1 = kit.batch("2024/05/01", first)
    b2 = kit.batch("2024/05/02", csv("id,ts,v", "4,2024-05-03T00:00:00Z,d"))
    done = kit.run(b1, b2)
    assert done.succeeded and outcomes(done) == [(b1.rel, COMMITTED), (b2.rel, COMMITTED)]
    assert [r[0] for r in kit.rows()] == [1, 2, 3, 4]

    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {kit.table}").collect()}
    assert properties["turnstile.owner"] == "tests"
    assert properties["commit.retry.num-retries"] == "7"
    partitions = spark.sql(f"SELECT partition.ts_day AS day, record_count FROM {kit.table}.partitions")
    assert sorted((str(r["day"]), r["record_count"]) for r in partitions.collect()) == [
        ("2024-05-01", 2),
        ("2024-05-02", 1),
        ("2024-05-03", 1),
    ]
    described = spark.sql(f"DESCRIBE TABLE EXTENDED {kit.table}").collect()
    assert any(r["data_type"] == "days(ts)" for r in described), described

    # 8. the result record of each batch
    r1 = result(kit, b1)
    assert r1.outcome is COMMITTED and r1.job_id == "job-1" and r1.error is None
    assert (r1.rows_read, r1.rows_written, r1.bad_rows) == (3, 3, 0)
    assert r1.bytes_read == len(first[1]) > 0
    assert r1.seconds > 0 and r1.finished_at is not None
    assert (r1.time_min, r1.time_max) == ("2024-05-01 13:05:00", "2024-05-02 01:00:00")
    assert result(kit, b2).time_min == result(kit, b2).time_max == "2024-05-03 00:00:00"
    # 9. the snapshot id in the record is the commit tagged with the batch, every property set
    summary = assert_tagged(kit, b1, "job-1")
    assert summary["added-records"] == "3"
    assert assert_tagged(kit, b2, "job-1")["operation"] == "append"
    assert result(kit, b2).snapshot_id != r1.snapshot_id
    assert done_signal(kit, "job-1") == done


def test_table_properties_are_set_as_load_json_writes_them_whatever_they_hold(
    spark: Any, tmp_path: Path
) -> None:
    note = "it's \"quoted\", a back\\slash\\; -- not a comment */ '); DROP TABLE x; --"
    properties = {"turnstile.note": note, "odd 'key' \\": "v"}
    kit = Kit(spark, tmp_path, table_properties=properties)
    done = kit.run(kit.batch("1", csv("id", "1")))
    assert done.succeeded, done.error
    found = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {kit.table}").collect()}
    assert found["turnstile.note"] == note
    assert found["odd 'key' \\"] == "v"


def test_overwrite_replaces_all_rows_with_one_snapshot_per_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, mode="overwrite")
    b1 = kit.batch("1", csv("id,v", "1,a", "2,b"))
    b2 = kit.batch("2", csv("id,v", "3,c"))
    done = kit.run(b1, b2)
    assert done.succeeded, done.error
    assert kit.rows() == [(3, "c")]
    assert list(tagged(kit)) == [key(b1), key(b2)]  # one snapshot each, nothing else
    assert_tagged(kit, b1, "job-1")
    summary = assert_tagged(kit, b2, "job-1")
    assert summary["deleted-records"] == "2" and summary["added-records"] == "1"
    assert (result(kit, b2).rows_read, result(kit, b2).rows_written) == (1, 1)
    first = spark.sql(f"SELECT * FROM {kit.table} VERSION AS OF {result(kit, b1).snapshot_id} ORDER BY id")
    assert [tuple(r) for r in first.collect()] == [(1, "a"), (2, "b")]


MERGE_LOAD = {
    "mode": "merge",
    "merge_keys": ["id"],
    "merge_order_by": "ts",
    "delete_column": "gone",
    "schema": "id INT, v STRING, ts INT, gone BOOLEAN",
}
INITIAL = [
    "1,a,1,false",
    "1,b,2,false",  # the later ts wins
    "2,x,1,false",
    "3,c,5,false",
    "3,d,5,false",  # a tie on ts: decided by the row's content, whatever the order
    "9,p,1,false",
    "9,r,1,false",  # another tie
    "4,q,1,false",
    "7,w,1,",  # a null delete flag keeps the row
]
CHANGES = [
    "2,x,3,true",  # delete
    "1,z,3,false",  # update
    "5,n,1,false",
    "5,m,2,true",  # inserted and deleted in the same batch: never appears
    "4,q2,0,false",
    "4,q3,9,false",  # the latest of two updates
    "6,e,1,true",  # deleting a row that is not there
    "8,,4,false",  # a null value
]


def test_merge_resolves_duplicates_deterministically_deletes_and_converges(
    spark: Any, tmp_path: Path
) -> None:
    finals = []
    # The rows as given, then reversed: "first row wins" or "last row wins" would flip every tie;
    # the reversed CDC batch also puts each insert after its delete.
    for order in ("given", "reversed"):
        kit = Kit(spark, tmp_path / order, **MERGE_LOAD)
        initial, changes = list(INITIAL), list(CHANGES)
        if order == "reversed":
            initial.reverse()
            changes.reverse()
        b1 = kit.batch("1", csv("id,v,ts,gone", *initial))
        b2 = kit.batch("2", csv("id,v,ts,gone", *changes))
        done = kit.run(b1, b2)
        assert done.succeeded, done.error
        assert columns(kit) == {"id": "int", "v": "string", "ts": "int"}  # no delete column
        assert_tagged(kit, b1, "job-1")
        assert assert_tagged(kit, b2, "job-1")["operation"] == "overwrite"
        assert result(kit, b2).rows_read == len(CHANGES)
        # The batch's rows merged, not the rows of the data files the copy-on-write rewrote.
        assert result(kit, b2).rows_written == len(CHANGES)
        finals.append(kit.rows())
    assert finals[0] == finals[1]
    rows = {r[0]: r[1:] for r in finals[0]}
    assert sorted(rows) == [1, 3, 4, 7, 8, 9]
    assert rows[1] == ("z", 3) and rows[4] == ("q3", 9) and rows[7] == ("w", 1) and rows[8] == (None, 4)
    assert rows[3] in {("c", 5), ("d", 5)} and rows[9] in {("p", 1), ("r", 1)}


# --- 3. exactly-once ----------------------------------------------------------------------------
def test_a_job_killed_after_a_commit_is_rerun_without_duplicates(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kit = Kit(spark, tmp_path)
    b1 = kit.batch("1", csv("id,v", "1,a", "2,b"))
    b2 = kit.batch("2", csv("id,v", "3,c"))
    b3 = kit.batch("3", csv("id,v", "4,d"))
    real = IcebergApplier.apply

    def killed(self: IcebergApplier, batch: ManifestBatch, job_id: str) -> BatchResult:
        real(self, batch, job_id)  # committed, then the job dies before writing its result record
        raise KeyboardInterrupt

    monkeypatch.setattr(IcebergApplier, "apply", killed)
    with pytest.raises(KeyboardInterrupt):
        kit.run(b1, b2, b3, job_id="job-killed")
    monkeypatch.undo()
    assert kit.rows() == [(1, "a"), (2, "b")]
    assert kit.store.read(b1.result) is None and done_signal(kit, "job-killed") is None

    done = kit.run(b1, b2, b3, job_id="job-2")
    assert done.succeeded and outcomes(done) == [("1", SKIPPED), ("2", COMMITTED), ("3", COMMITTED)]
    assert done_signal(kit, "job-2") == done
    skipped = result(kit, b1)
    # The killed job's commit is in the history: the SKIPPED record names its snapshot.
    assert (skipped.outcome, skipped.job_id, skipped.rows_written, skipped.snapshot_id) == (
        SKIPPED,
        "job-2",
        0,
        tagged(kit)[key(b1)][0],
    )
    assert kit.rows() == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert tagged(kit)[key(b1)][1]["turnstile.job-id"] == "job-killed"
    assert_tagged(kit, b2, "job-2")

    again = kit.run(b1, b2, b3, job_id="job-3")  # the same manifest once more: nothing to do
    assert again.succeeded and list(again.outcomes.values()) == [SKIPPED] * 3
    assert kit.rows() == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert len(tagged(kit)) == 3


def test_a_reuploaded_success_is_applied_again_with_its_new_data(spark: Any, tmp_path: Path) -> None:
    # An explicit schema and a bad row make the read a cached one: the fixed re-upload, under the
    # same file name, must not be served from the first read's cache.
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", max_bad_records=1)
    first = kit.batch("2024/05/01/13", csv("id,v", "1,a", "x,b"))
    assert kit.run(first).succeeded
    assert kit.rows() == [(1, "a")]
    fixed = kit.batch("2024/05/01/13", csv("id,v", "1,a", "2,b"))  # same rel, new generation
    assert fixed.success_generation != first.success_generation
    done = kit.run(first, fixed, job_id="job-2")
    assert outcomes(done) == [("2024/05/01/13", COMMITTED)]  # rel-keyed: the new generation's outcome
    assert result(kit, first).outcome is COMMITTED  # its commit's record is never replaced
    assert (result(kit, fixed).outcome, result(kit, fixed).bad_rows) == (COMMITTED, 0)
    assert kit.rows() == [(1, "a"), (1, "a"), (2, "b")]  # on purpose: the upload said "again"
    assert list(tagged(kit)) == [key(first), key(fixed)]


def test_a_rolled_back_batch_is_applied_again(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    b1 = kit.batch("1", csv("id,v", "1,a"))
    b2 = kit.batch("2", csv("id,v", "2,b"))
    assert kit.run(b1, b2).succeeded
    rolled_back = result(kit, b2).snapshot_id
    spark.sql(
        f"CALL local.system.rollback_to_snapshot('{kit.dataset}.{kit.name}', {result(kit, b1).snapshot_id})"
    )
    assert kit.rows() == [(1, "a")]

    done = kit.run(b1, b2, job_id="job-2")
    assert done.succeeded and outcomes(done) == [("1", SKIPPED), ("2", COMMITTED)]
    assert kit.rows() == [(1, "a"), (2, "b")]
    reapplied = result(kit, b2).snapshot_id
    assert reapplied not in (None, rolled_back)
    assert kit.run(b1, b2, job_id="job-3").outcomes == {"1": SKIPPED, "2": SKIPPED}
    # The ledger read from the table's metadata agrees with Iceberg's own metadata tables.
    current_ancestors = spark.sql(
        f"SELECT s.summary['{commits.BATCH_KEY}'] AS batch, s.snapshot_id AS id FROM {kit.table}.snapshots s "
        f"JOIN {kit.table}.history h ON s.snapshot_id = h.snapshot_id WHERE h.is_current_ancestor"
    ).collect()
    found = commits.committed_batches(spark, kit.table)
    assert found == {row["batch"]: row["id"] for row in current_ancestors}
    assert found == {key(b1): result(kit, b1).snapshot_id, key(b2): reapplied}


# --- 4. bad rows --------------------------------------------------------------------------------
def test_bad_rows_under_the_limit_are_set_aside(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", max_bad_records=1)
    batch = kit.batch("1", csv("id,v", "1,a", "two,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a"), (3, "c")]
    got = result(kit, batch)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 2, 1)
    found = kit.store.read(f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl")
    assert found is not None
    (line,) = [json.loads(x) for x in found.text().splitlines()]
    assert line["row"] == "two,b"
    assert "id INT, v STRING" in line["reason"]


def test_bad_rows_over_the_limit_fail_the_batch_and_commit_nothing(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING")  # max_bad_records: 0
    good = kit.batch("1", csv("id,v", "1,a"))
    bad = kit.batch("2", csv("id,v", "2,b", "x,c", "y,d"))
    done = kit.run(good, bad)
    assert not done.succeeded and outcomes(done) == [("1", COMMITTED), ("2", FAILED)]
    where = f"gs://{BUCKET}/{bad.failed_prefix}bad-rows-{bad.success_generation}.jsonl"
    error = result(kit, bad).error
    assert error is not None and error.startswith("2 row") and "could not be parsed" in error
    assert where in error
    assert "max_bad_records is 0" in error
    failed = result(kit, bad)  # the failed attempt counts what it read and set aside
    assert (failed.rows_read, failed.rows_written, failed.bad_rows) == (3, 0, 2)
    assert done.error is not None and where in done.error
    assert kit.rows() == [(1, "a")]
    assert list(tagged(kit)) == [key(good)]
    stored = kit.store.read(where.removeprefix(f"gs://{BUCKET}/"))
    assert stored is not None and len(stored.text().splitlines()) == 2


def test_bad_rows_over_the_limit_raise_a_corrupt_record_holding_the_first_row(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING")
    bad = kit.batch("1", csv("id,v", "1,a", "x,c"))
    with pytest.raises(CorruptRecord, match="1 row") as caught:
        kit.applier().apply(bad, "job-1")
    assert caught.value.value == "x,c"


# --- 5. schema ----------------------------------------------------------------------------------
def test_add_columns_adds_new_columns_and_widens_types(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema_evolution="add_columns")
    b1 = kit.batch("1", csv("id,f,v", "1,1.5,a"), schema="id INT, f FLOAT, v STRING")
    b2 = kit.batch(
        "2",
        csv("id,f,v,extra", "3000000000,2.25,b,new"),
        schema="id BIGINT, f DOUBLE, v STRING, extra STRING",
    )
    done = kit.run(b1, b2)
    assert done.succeeded, done.error
    assert columns(kit) == {"id": "bigint", "f": "double", "v": "string", "extra": "string"}
    assert kit.rows() == [(1, 1.5, "a", None), (3000000000, 2.25, "b", "new")]
    assert_tagged(kit, b2, "job-1")


def test_a_manifest_stops_at_its_first_failing_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    b1 = kit.batch("1", csv("id,v,n", "1,a,10"))
    b2 = kit.batch("2", csv("id,v", "2,b"))  # no n: written with nulls
    b3 = kit.batch("3", csv("id,v,n,extra,more", "3,c,30,x,y"))  # new columns, evolution off
    b4 = kit.batch("4", csv("id,v,n", "4,d,40"))
    done = kit.run(b1, b2, b3, b4)
    assert not done.succeeded
    assert outcomes(done) == [("1", COMMITTED), ("2", COMMITTED), ("3", FAILED)]
    assert done_signal(kit, "job-1") == done
    assert kit.rows() == [(1, "a", 10), (2, "b", None)]
    assert (result(kit, b1).outcome, result(kit, b2).outcome) == (COMMITTED, COMMITTED)
    assert kit.store.read(b4.result) is None
    assert list(tagged(kit)) == [key(b1), key(b2)]
    error = result(kit, b3).error
    assert error == (
        f"the batch does not fit table {kit.table}:\n"
        "  extra: new column (string), not in the table\n"
        "  more: new column (string), not in the table\n"
        'Set "schema_evolution": "add_columns" in load.json to add columns and widen types.'
    )
    assert done.error == f"batch '3': {error}"


def test_a_string_into_an_int_column_fails_column_by_column(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema_evolution="add_columns")
    b1 = kit.batch("1", csv("id,n", "1,10"))
    b2 = kit.batch("2", csv("id,n", "2,ten"))
    done = kit.run(b1, b2)
    assert outcomes(done) == [("1", COMMITTED), ("2", FAILED)]
    error = result(kit, b2).error or ""
    # Without a `schema`, a column the table has is read as the table's type: `ten` is a bad row.
    assert "the first: column 'n' (int) cannot hold 'ten' (row '2,ten' in gs://" in error
    assert "id" not in error.partition(" (row")[0] and "schema_evolution" not in error  # no hint
    assert kit.rows() == [(1, 10)]


def test_a_time_column_missing_from_the_batch_fails_before_the_commit(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, time_column="ts")
    batch = kit.batch("1", csv("id,v", "1,a"))
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    assert "time_column 'ts' is not a column of batch '1' (its columns: id, v)" in (done.error or "")
    assert not spark.catalog.tableExists(kit.table)


# --- 6. transforms ------------------------------------------------------------------------------
def test_a_select_transform_shapes_the_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    kit.transform = (
        "-- rows after the first; upper-cased\n"
        "SELECT id, upper(v) AS v, concat(v, ';') AS marked /* a ; in a comment */\n"
        "FROM batch WHERE id > 1;\n"
    )
    batch = kit.batch("1", csv("id,v", "1,a", "2,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(2, "B", "b;"), (3, "C", "c;")]
    assert (result(kit, batch).rows_read, result(kit, batch).rows_written) == (3, 2)
    assert_tagged(kit, batch, "job-1")


def test_dml_transforms_write_to_the_table_tagged(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, s STRING, n INT")
    kit.transform = (
        "-- upsert: append the batch's letter; the table is ${table}\n"
        "MERGE INTO ${table} t USING batch b ON t.id = b.id\n"
        "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c)\n"
        "WHEN NOT MATCHED THEN INSERT (id, s, n) VALUES (b.id, b.c, 0)"
    )
    b1 = kit.batch("1", csv("id,c", "1,A", "2,X"))
    b2 = kit.batch("2", csv("id,c", "1,B"))
    kit.transform = "UPDATE ${table} SET n = n + 1 WHERE id IN (SELECT id FROM batch)"
    b3 = kit.batch("3", csv("id,c", "2,ignored"))
    done = kit.run(b1, b2, b3)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "AB", 0), (2, "X", 1)]
    assert list(tagged(kit)) == [key(b1), key(b2), key(b3)]  # the DML's own commits, tagged
    for batch in (b1, b2, b3):
        assert_tagged(kit, batch, "job-1")
    assert result(kit, b1).rows_written == 2


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT * FROM batch; DROP TABLE ${table}",
            "transform.sql must hold one statement (a SELECT over `batch`, or one "
            "MERGE/UPDATE/DELETE/INSERT); it holds several",
        ),
        (
            "SELECT *, '${tabel}' AS t FROM batch",
            "transform.sql has an unknown placeholder 'tabel'; known: ${table}, ${catalog}, ${dataset}, "
            "${table_name}, ${rel}, ${generation}",
        ),
    ],
    ids=["two-statements", "unknown-placeholder"],
)
def test_a_bad_transform_is_rejected(spark: Any, tmp_path: Path, sql: str, message: str) -> None:
    kit = Kit(spark, tmp_path)
    kit.transform = sql
    batch = kit.batch("1", csv("id,v", "1,a"))
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    assert result(kit, batch).error == message
    assert done.error == f"batch '1': {message}"
    assert not spark.catalog.tableExists(kit.table)


@pytest.mark.parametrize(
    ("sql", "problem"),
    [
        ("SELECT id, v FORM batch", "PARSE_SYNTAX_ERROR"),
        ("SELECT id, nope FROM batch", "`nope`"),
        ("UPDATE ${table} SET nope = 1 WHERE id IN (SELECT id FROM batch)", "`nope`"),
    ],
    ids=["syntax-error", "unknown-column", "dml-unknown-column"],
)
def test_a_transform_spark_rejects_is_reported_with_its_file(
    spark: Any, tmp_path: Path, sql: str, problem: str
) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, v STRING")
    kit.transform = sql
    kit.transform_source = f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql"
    batch = kit.batch("1", csv("id,v", "1,a"))
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    error = result(kit, batch).error or ""
    assert error.startswith(f"{kit.transform_source} fails on batch '1': "), error
    assert problem in error
    assert "\n" not in error  # Spark's first line, not its plan
    assert error.endswith(
        "; fix the statement in that file (it reads the view `batch`), then apply the batch again "
        "(turnstile status shows the command)"
    )
    assert done.error == f"batch '1': {error}"
    assert not spark.catalog.tableExists(kit.table) or not tagged(kit)  # nothing committed


# Text that Spark's lexer and `turnstile.spark.lexical` must cut alike: placeholders are filled by
# where the lexer says they stand.
LEXED = [
    "SELECT 'a\\'b' x -- c\nFROM t /* x /* y */ z */ /*+ HINT */ r'a\\' \"q\\\"\" `b``c` R\"x\"",
    "/* a /*+ b */ c */ d",
    "x1r'a' 3r'b' _r'c' (r'd') é r'e' $r'f'",
    "-- a\\\nb\nc -- d\r\ne -- f\rg",
    "SELECT '--', \"/*\", `--`, '*/' -- ' \" `\n, 1",
    "a---b a/**/b a/*/b*/c /*+*/ '\\\\' 'x' r'' \"\\\\\" \"\"",
    "SELECT $${rel}, '${rel}', `${x}`, \"it's\", 'say \"hi\"'",
]


def spark_cut(spark: Any, text: str) -> list[tuple[str, str]]:
    """`text` cut by Spark's own lexer into lexical's kinds: literals, quoted names, comments, code."""
    parser = spark._jvm.org.apache.spark.sql.catalyst.parser
    stream = parser.UpperCaseCharStream(spark._jvm.org.antlr.v4.runtime.CharStreams.fromString(text))
    lexer = parser.SqlBaseLexer(stream)
    vocabulary = lexer.getVocabulary()
    kinds = {
        "STRING_LITERAL": "string",
        "DOUBLEQUOTED_STRING": "string",
        "BACKQUOTED_IDENTIFIER": "name",
        "SIMPLE_COMMENT": "comment",
        "BRACKETED_COMMENT": "comment",
    }
    found: list[tuple[str, str]] = []
    for token in lexer.getAllTokens():
        piece = str(token.getText())
        kind = kinds.get(str(vocabulary.getSymbolicName(token.getType())), "code")
        if kind == "string" and piece[:1] in "rR":
            kind = "raw"
        if kind == "code" and found and found[-1][0] == "code":
            found[-1] = ("code", found[-1][1] + piece)
        else:
            found.append((kind, piece))
    return found


@pytest.mark.parametrize("text", LEXED)
def test_sql_is_cut_as_spark_s_own_lexer_cuts_it(spark: Any, text: str) -> None:
    assert [(part.kind.value, part.text) for part in lexical.segments(text)] == spark_cut(spark, text)


@pytest.mark.parametrize(
    ("statement", "described"),
    [
        ("SELECT * FROM batch WHERE v = 'INSERT'", "a SELECT statement"),
        ("-- INSERT first\nWITH a AS (SELECT 1) SELECT * FROM a", "a SELECT statement"),
        ("(SELECT 1) UNION (SELECT 2)", "a SELECT statement"),
        ("VALUES (1), (2)", "a SELECT statement"),
        ("TABLE batch", "a SELECT statement"),
        ("FROM batch SELECT *", "a SELECT statement"),
        ("SELECT /*+ REPARTITION(2) */ * FROM batch", "a SELECT statement"),
        ("INSERT OVERWRITE t SELECT * FROM batch", "an INSERT statement"),
        ("WITH a AS (SELECT 1) MERGE INTO t USING a ON true WHEN MATCHED THEN DELETE", "a MERGE statement"),
        ("UPDATE t SET a = 1", "an UPDATE statement"),
        ("DELETE FROM t WHERE a = 1", "a DELETE statement"),
        ("CREATE TEMPORARY VIEW v AS SELECT 1", "a CREATE VIEW statement"),
        ("CACHE TABLE batch", "a CACHE TABLE statement"),
        ("EXPLAIN SELECT 1", "an EXPLAIN statement"),
        ("ALTER TABLE t WRITE ORDERED BY id", "a SET WRITE DISTRIBUTION AND ORDERING statement"),
        ("USE local", "a SET CATALOG AND NAMESPACE statement"),
    ],
)
def test_spark_s_parser_says_what_a_statement_is_without_running_it(
    spark: Any, statement: str, described: str
) -> None:
    found = statements.parse(spark, statement)
    assert found.described() == described
    assert found.dml == (described.split()[1] in ("INSERT", "MERGE", "UPDATE", "DELETE"))
    assert spark.catalog.currentCatalog() == "spark_catalog"  # USE did not run


def test_two_statements_do_not_parse(spark: Any) -> None:
    with pytest.raises(ParseException, match="PARSE_SYNTAX_ERROR"):
        statements.parse(spark, "SELECT 1; SELECT 2")


NOT_A_TRANSFORM = "a transform.sql is one SELECT over the view `batch`, whose rows are written in the"


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("CREATE TABLE ${catalog}.ds.made_${table_name} (id INT) USING iceberg", "a CREATE TABLE statement"),
        ("DROP TABLE ${catalog}.ds.keep_${table_name}", "a DROP TABLE statement"),
        (
            "CALL ${catalog}.system.rollback_to_snapshot("
            "table => 'ds.keep_${table_name}', snapshot_id => FIRST)",
            "a CALL statement",
        ),
        ("FROM batch INSERT INTO ${table} SELECT * INSERT INTO ${table} SELECT *", "a multi-table INSERT"),
        ("SET spark.sql.ansi.enabled = true", "a SET statement"),
    ],
    ids=["create-table", "drop-table", "call", "multi-insert", "set"],
)
def test_a_transform_neither_a_select_nor_one_dml_is_refused_naming_its_file_and_kind(
    spark: Any, tmp_path: Path, statement: str, kind: str
) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, v STRING")
    keep = f"local.ds.keep_{kit.name}"  # what the statement would change: it must stay as it is
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.ds")
    spark.sql(f"CREATE TABLE {keep} (id INT) USING iceberg")
    spark.sql(f"INSERT INTO {keep} VALUES (1)")
    first = spark.sql(f"SELECT snapshot_id FROM {keep}.snapshots").first()[0]
    spark.sql(f"INSERT INTO {keep} VALUES (2)")
    kit.transform = statement.replace("FIRST", str(first))
    kit.transform_source = f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql"
    batch = kit.batch("1", csv("id,v", "1,a"))
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    assert result(kit, batch).error == (
        f"{kit.transform_source} is {kind}; {NOT_A_TRANSFORM} table's mode, or one "
        "MERGE/UPDATE/DELETE/INSERT that writes the table itself: rewrite it as one of these, then apply "
        "the batch again (turnstile status shows the command)"
    )
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {keep}").collect()) == [1, 2]
    assert not spark.catalog.tableExists(f"local.ds.made_{kit.name}")
    assert spark.conf.get("spark.sql.ansi.enabled") == "false"
    assert not spark.catalog.tableExists(kit.table) or not tagged(kit)  # nothing committed


def test_a_dml_transform_opening_with_a_cte_is_the_batch_s_one_tagged_commit(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, v STRING")
    kit.transform = (
        "WITH kept AS (SELECT id, upper(v) AS v FROM batch WHERE id > 1)\n"
        "INSERT INTO ${table} SELECT id, v FROM kept"
    )
    batch = kit.batch("1", csv("id,v", "1,a", "2,b"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(2, "B")]
    assert list(tagged(kit)) == [key(batch)]  # the INSERT's own commit, tagged, and no other
    assert_tagged(kit, batch, "job-1")


def test_a_transform_with_an_unknown_placeholder_names_its_file(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    kit.transform = "SELECT *, '${tabel}' AS t FROM batch"
    kit.transform_source = f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql"
    batch = kit.batch("1", csv("id,v", "1,a"))
    kit.run(batch)
    assert (result(kit, batch).error or "").startswith(
        f"{kit.transform_source} has an unknown placeholder 'tabel'; known: ${{table}}"
    )


def bad_rows_file(kit: Kit, batch: ManifestBatch) -> list[dict[str, str]]:
    found = kit.store.read(f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl")
    assert found is not None
    return [json.loads(x) for x in found.text().splitlines()]


def test_bad_rows_name_the_column_and_value_that_failed(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING, day DATE", max_bad_records=2)
    batch = kit.batch(
        "1", csv("id,v,day", "1,a,2024-05-01", "two,b,2024-05-02", "3,c,someday", "4,d,2024-05-04")
    )
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a", date(2024, 5, 1)), (4, "d", date(2024, 5, 4))]
    lines = sorted(bad_rows_file(kit, batch), key=lambda line: line["row"])
    assert [(x["row"], x["column"], x["value"]) for x in lines] == [
        ("3,c,someday", "day", "someday"),
        ("two,b,2024-05-02", "id", "two"),
    ]
    assert lines[1]["reason"] == (
        "does not match the schema id INT, v STRING, day DATE: column 'id' (int) cannot hold 'two'"
    )


def test_bad_json_rows_name_the_column_or_say_nothing_when_the_line_is_malformed(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, format="jsonl", schema="id INT, tags ARRAY<STRING>")
    data = b'{"id": 1, "tags": ["a"]}\n{"id": 2, "tags": "b"}\n{"id": 3, "tags": [\n'
    batch = kit.batch("1", ("part-0.jsonl", data))
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    lines = {line["row"]: line for line in bad_rows_file(kit, batch)}
    wrong_type = lines['{"id": 2, "tags": "b"}']
    assert (wrong_type["column"], wrong_type["value"]) == ("tags", "b")
    malformed = lines['{"id": 3, "tags": [']
    assert "column" not in malformed
    assert malformed["reason"] == "does not match the schema id INT, tags ARRAY<STRING>"
    error = result(kit, batch).error or ""
    assert error.startswith("2 row(s) could not be parsed (max_bad_records is 0); the first: ")


def test_the_failure_names_the_first_bad_rows_column_and_value(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING")
    bad = kit.batch("1", csv("id,v", "1,a", "x,c"))
    with pytest.raises(CorruptRecord) as caught:
        kit.applier().apply(bad, "job-1")
    where = f"gs://{BUCKET}/{bad.failed_prefix}bad-rows-{bad.success_generation}.jsonl"
    assert str(caught.value) == (
        "1 row(s) could not be parsed (max_bad_records is 0); the first: column 'id' (int) cannot hold 'x' "
        f"(row 'x,c' in gs://{BUCKET}/{kit.prefix}/1/part-0.csv); they are in {where}. Fix the data (or "
        "the schema in load.json) and re-upload, "
        "or raise max_bad_records."
    )
    assert (caught.value.column, caught.value.value) == ("id", "x,c")


def test_the_transform_named_is_the_one_the_config_cascade_chose(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    kit.store.write("_config/transform.sql", b"SELECT * FROM batch")  # farther: not in force
    kit.store.write(f"{kit.prefix}/_config/transform.sql", b"SELECT id, missing FROM batch")
    kit.batch("1", csv("id,v", "1,a"))  # the data files
    clock = SystemClock()
    inv = Invocation(kit.store, NoRunner(), Settings.from_env({}), clock, "test", clock.now())
    folder = f"{kit.prefix}/1/"
    resolved = ConfigReader(kit.store).resolve(folder)
    batch = manifest_batch(inv, parse_success(BUCKET, f"{folder}_SUCCESS"), resolved, 5)
    done = kit.run(batch)
    assert outcomes(done) == [("1", FAILED)]
    assert (result(kit, batch).error or "").startswith(
        f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql fails on batch '1': [UNRESOLVED_COLUMN"
    )
