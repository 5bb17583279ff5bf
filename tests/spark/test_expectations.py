"""load.json's `expectations` in the real job: real local Spark writing real Iceberg tables, the
batch's files, result records and `_failed/` files in fake-gcs-server."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.errors import BatchFailed
from turnstile.names.paths import Table
from turnstile.ops import history as history_ops
from turnstile.ops import validate as validate_ops
from turnstile.ops.validate import Report
from turnstile.ops.validate_expectations import SparkChecker
from turnstile.spark import expectations
from turnstile.state.records import BatchOutcome, BatchResult, ExpectationCount, ManifestBatch
from turnstile.store.gcs import GcsStore

pytestmark = pytest.mark.spark

ROWS = csv("id,amount", "1,10", "2,-5", "3,", "4,7")  # -5 fails `amount >= 0`, and so does the null
POSITIVE = {"name": "positive_amount", "check": "amount >= 0"}


def result(kit: Kit, batch: ManifestBatch) -> BatchResult:
    found = kit.store.read(batch.result)
    assert found is not None, f"no result record at {batch.result}"
    return BatchResult.decode(found.data, batch.result)


def columns(kit: Kit) -> list[str]:
    return [x.name for x in kit.spark.table(kit.table).schema.fields]


@pytest.fixture
def job_log() -> Any:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep()
    logger = logging.getLogger(logs.LOGGER_NAME)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.mark.parametrize("ordered", [True, False], ids=["ordered", "unordered"])
def test_warn_counts_the_failing_rows_null_included_and_loads_every_row(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, job_log: list[logging.LogRecord], ordered: bool
) -> None:
    kit = Kit(spark, tmp_path, store=gcs_store, expectations=[POSITIVE | {"on_fail": "warn"}])
    batch = kit.batch("1", ROWS)
    done = kit.run(batch, ordered=ordered)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (2, -5), (3, None), (4, 7)]
    assert columns(kit) == ["id", "amount"]  # the row's object is looked up, never written
    got = result(kit, batch)
    assert got.expectations == (ExpectationCount(name="positive_amount", on_fail="warn", failed_rows=2),)
    assert (got.rows_read, got.rows_written) == (4, 4)
    assert gcs_store.list_entries(batch.failed_prefix) == []
    (event,) = [r for r in job_log if getattr(r, "event", None) == "expectation_rows_failed"]
    assert event.levelname == "WARNING"
    assert (event.expectation, event.on_fail, event.failed_rows, event.table) == (  # type: ignore[attr-defined]
        "positive_amount",
        "warn",
        2,
        kit.prefix,
    )
    assert event.getMessage().startswith(
        f"expectation_rows_failed: expectation positive_amount of gs://{kit.bucket}/{kit.prefix}: 2 row(s)"
    )


def test_drop_loads_the_rest_and_sets_the_dropped_rows_aside_with_the_expectation_s_name(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[
            POSITIVE | {"on_fail": "drop"},
            {"name": "small_id", "check": "id < 4", "on_fail": "drop"},
            {"name": "even_id", "check": "id % 2 = 0", "on_fail": "warn"},
        ],
    )
    batch = kit.batch("1", ROWS)
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10)]
    got = result(kit, batch)
    assert [(c.name, c.on_fail, c.failed_rows) for c in got.expectations] == [
        ("positive_amount", "drop", 2),
        ("small_id", "drop", 1),
        ("even_id", "warn", 2),
    ]
    assert (got.rows_read, got.rows_written) == (4, 1)
    # `turnstile history` reads the job's own record.
    table = Table(gcs_store.bucket, kit.prefix, kit.dataset, kit.name)
    (entry,) = history_ops.history(gcs_store, table, success_filename="_SUCCESS", last=None).entries
    assert list(entry.to_json()["expectations"]) == [
        {"name": "positive_amount", "on_fail": "drop", "failed_rows": 2},
        {"name": "small_id", "on_fail": "drop", "failed_rows": 1},
        {"name": "even_id", "on_fail": "warn", "failed_rows": 2},
    ]
    assert entry.expectations_text() == "positive_amount 2 dropped, small_id 1 dropped, even_id 2 warned"
    stored = gcs_store.read(f"{batch.failed_prefix}expectations-{batch.success_generation}.jsonl")
    assert stored is not None
    lines = sorted((json.loads(x) for x in stored.text().splitlines()), key=lambda x: x["row"]["id"])
    source = f"gs://{kit.bucket}/{kit.prefix}/1/part-0.csv"
    assert lines == [
        {
            "expectation": "positive_amount",
            "expectations": ["positive_amount"],
            "row": {"id": 2, "amount": -5},
            "file": source,
        },
        {
            "expectation": "positive_amount",
            "expectations": ["positive_amount"],
            "row": {"id": 3, "amount": None},
            "file": source,
        },
        {
            "expectation": "small_id",
            "expectations": ["small_id"],
            "row": {"id": 4, "amount": 7},
            "file": source,
        },
    ]


def test_drop_on_a_merge_counts_the_rows_merged_without_the_dropped(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    # A merge is read the careful way (cached), where the row's object is read with it.
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        mode="merge",
        merge_keys=["id"],
        expectations=[POSITIVE | {"on_fail": "drop"}],
    )
    batch = kit.batch("1", ROWS)
    kept = spark.sparkContext._jsc.getPersistentRDDs().size()
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == kept  # the checkpointed read released
    assert kit.rows() == [(1, 10), (4, 7)]
    got = result(kit, batch)
    assert (got.rows_read, got.rows_written, got.expectations[0].failed_rows) == (4, 2, 2)
    stored = gcs_store.read(f"{batch.failed_prefix}expectations-{batch.success_generation}.jsonl")
    assert stored is not None
    files = {json.loads(x)["file"] for x in stored.text().splitlines()}
    assert files == {f"gs://{kit.bucket}/{kit.prefix}/1/part-0.csv"}


def test_fail_fails_the_batch_naming_the_expectation_the_count_the_first_row_and_its_object(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[
            {"name": "has_id", "check": "id IS NOT NULL", "on_fail": "fail"},
            POSITIVE | {"on_fail": "fail"},
        ],
    )
    good = kit.batch("1", csv("id,amount", "1,1"))
    bad = kit.batch("2", ("a.csv", b"id,amount\n5,1\n"), ("b.csv", b"id,amount\n6,-1\n7,-2\n"))
    done = kit.run(good, bad)
    assert not done.succeeded
    assert list(done.outcomes.items()) == [("1", BatchOutcome.COMMITTED), ("2", BatchOutcome.FAILED)]
    failed = result(kit, bad)
    error = failed.error or ""
    assert "expectation 'positive_amount' (expectations[1].check: amount >= 0) failed on 2 row(s)" in error
    assert 'the first: {"id":6,"amount":-1}' in error or 'the first: {"id":7,"amount":-2}' in error
    assert f"in gs://{kit.bucket}/{kit.prefix}/2/b.csv" in error
    assert [(c.name, c.failed_rows) for c in failed.expectations] == [("has_id", 0), ("positive_amount", 2)]
    assert failed.rows_read == 3
    assert kit.rows() == [(1, 1)]  # nothing of the failed batch committed
    assert len(kit.snapshots()) == 1


def jobs_run(spark: Any, action: Any) -> tuple[Any, int]:
    """`action()`'s value, and how many Spark jobs it ran."""
    context = spark.sparkContext
    group = f"expectations-{id(action)}"
    context.setJobGroup(group, group)
    try:
        value = action()
    finally:
        context.setJobGroup("idle", "idle")
    return value, len(context.statusTracker().getJobIdsForGroup(group))


@pytest.mark.parametrize("dropping", [True, False], ids=["rows-dropped", "none-dropped"])
def test_with_a_drop_one_query_counts_every_expectation_nulls_included_and_finds_the_dropped_rows(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, dropping: bool
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[
            POSITIVE | {"on_fail": "warn"},
            {"name": "has_id", "check": "id IS NOT NULL", "on_fail": "drop"},
            {"name": "small_id", "check": "id < 3", "on_fail": "drop" if dropping else "warn"},
        ],
    )
    data = csv("id,amount", "1,10", "2,-5", ",3", "4,", "5,7")
    batch = kit.batch("1", data)
    path = tmp_path / "rows.csv"
    path.write_bytes(data[1])
    rows = spark.read.option("header", "true").schema("id BIGINT, amount BIGINT").csv(str(path))
    where = expectations.Where(gcs_store, batch.data_uris, [str(path)])
    checks = [e.check for e in batch.load.expectations]
    checked, jobs = jobs_run(spark, lambda: expectations.check(batch, rows, checks, where))
    assert jobs == 1  # the counts are observed on the query that collects the rows to set aside
    # A NULL check fails the row, as an aggregation counting `NOT coalesce(check, false)` finds.
    assert [(c.name, c.failed_rows) for c in checked.counts] == [
        ("positive_amount", 2),
        ("has_id", 1),
        ("small_id", 3),
    ]
    assert checked.rows_read == 5
    kept = sorted(tuple(r) for r in checked.rows.collect())
    stored = gcs_store.read(f"{batch.failed_prefix}expectations-{batch.success_generation}.jsonl")
    assert stored is not None
    lines = sorted((json.loads(x) for x in stored.text().splitlines()), key=lambda x: x["row"]["id"] or 0)
    if dropping:
        assert kept == [(1, 10), (2, -5)]
        assert [(x["row"]["id"], x["expectations"]) for x in lines] == [
            (None, ["has_id", "small_id"]),
            (4, ["small_id"]),
            (5, ["small_id"]),
        ]
    else:
        assert kept == [(1, 10), (2, -5), (4, None), (5, 7)]
        assert [(x["row"]["id"], x["expectations"]) for x in lines] == [(None, ["has_id"])]
    assert checked.dropped == len(lines)


def test_a_fail_beside_a_drop_fails_before_any_commit_and_sets_nothing_aside(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[
            POSITIVE | {"on_fail": "drop"},
            {"name": "small_id", "check": "id < 4", "on_fail": "fail"},
        ],
    )
    batch = kit.batch("1", ROWS)
    done = kit.run(batch)
    assert not done.succeeded
    failed = result(kit, batch)
    assert "expectation 'small_id' (expectations[1].check: id < 4) failed on 1 row(s)" in (failed.error or "")
    assert [(c.name, c.failed_rows) for c in failed.expectations] == [("positive_amount", 2), ("small_id", 1)]
    assert gcs_store.list_entries(batch.failed_prefix) == []
    assert not kit.spark.catalog.tableExists(kit.table) or kit.snapshots() == []


@pytest.mark.parametrize(
    ("check", "found"),
    [
        ("amount >=", "PARSE_SYNTAX_ERROR"),
        ("amonut >= 0", "amonut"),
        ("amount + 1", "boolean"),
    ],
    ids=["does-not-parse", "unknown-column", "not-boolean"],
)
def test_a_check_that_cannot_run_fails_the_batch_naming_it(
    spark: Any, tmp_path: Path, gcs_store: GcsStore, check: str, found: str
) -> None:
    kit = Kit(
        spark, tmp_path, store=gcs_store, expectations=[{"name": "e", "check": check, "on_fail": "warn"}]
    )
    batch = kit.batch("1", ROWS)
    with pytest.raises(BatchFailed, match=r"expectations\[0\]\.check") as caught:
        kit.applier().apply(batch, "job-1")
    assert found in str(caught.value)
    assert not spark.catalog.tableExists(kit.table)


def test_placeholders_are_filled_as_sql_values_and_an_unknown_one_is_refused(
    spark: Any, tmp_path: Path, gcs_store: GcsStore
) -> None:
    # A rel holding a quote stays one string literal, never SQL.
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[{"name": "own_rel", "check": "tag = ${rel}", "on_fail": "drop"}],
    )
    batch = kit.batch("it's", csv("id,tag", "1,it's", "2,other"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "it's")]
    unknown = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        expectations=[{"name": "x", "check": "id = ${nope}", "on_fail": "warn"}],
    )
    with pytest.raises(BatchFailed, match=r"expectations\[0\]\.check has an unknown placeholder 'nope'"):
        unknown.applier().apply(unknown.batch("1", ROWS), "job-1")


def test_checks_read_the_mapped_columns(spark: Any, tmp_path: Path, gcs_store: GcsStore) -> None:
    kit = Kit(
        spark,
        tmp_path,
        store=gcs_store,
        mapping=[{"rename": "amount", "to": "total"}, {"cast": "total", "type": "bigint"}],
        expectations=[{"name": "positive_total", "check": "total > 0", "on_fail": "drop"}],
    )
    batch = kit.batch("1", ROWS)
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (4, 7)]
    assert columns(kit) == ["id", "total"]


# --- turnstile validate ---------------------------------------------------------------------------
def validate(store: GcsStore, spark: Any, files: dict[str, bytes]) -> Report:
    for name, data in files.items():
        store.write(name, data)
    return validate_ops.validate(
        store, Settings.from_env({}), validate_ops.objects_to_check(store, ""), checker=SparkChecker(spark)
    )


def load_json(*expectations: dict[str, str]) -> bytes:
    return json.dumps({"expectations": list(expectations)}).encode()


def test_validate_names_a_check_spark_s_parser_refuses_with_its_key_and_spark_s_error(
    spark: Any, gcs_store: GcsStore
) -> None:
    report = validate(
        gcs_store,
        spark,
        {
            "ds/t/_config/load.json": load_json(
                POSITIVE | {"on_fail": "warn"}, {"name": "broken", "check": "amount >=", "on_fail": "fail"}
            )
        },
    )
    (problem,) = report.problems
    assert problem.object == f"gs://{gcs_store.bucket}/ds/t/_config/load.json"
    assert problem.message.startswith("expectations[1].check (amount >=) does not parse: ")
    assert "PARSE_SYNTAX_ERROR" in problem.message
    assert "expectations[0]" not in problem.message
    assert report.warnings == []


def test_validate_refuses_an_unknown_placeholder_and_accepts_the_known_ones(
    spark: Any, gcs_store: GcsStore
) -> None:
    report = validate(
        gcs_store,
        spark,
        {
            "ds/t/_config/load.json": load_json(
                {"name": "own", "check": "tag = ${rel} AND n < ${generation}", "on_fail": "warn"},
                {"name": "typo", "check": "tag = ${rell}", "on_fail": "warn"},
            )
        },
    )
    assert [p.message.split(";")[0] for p in report.problems] == [
        "expectations[1].check has an unknown placeholder 'rell'"
    ]


def test_validate_resolves_each_check_over_the_batch_s_sampled_and_mapped_columns(
    spark: Any, gcs_store: GcsStore
) -> None:
    config = {
        "mapping": [{"rename": "amount", "to": "total"}],
        "expectations": [
            {"name": "ok", "check": "total >= 0 AND id IS NOT NULL", "on_fail": "warn"},
            {"name": "gone", "check": "amount >= 0", "on_fail": "drop"},
        ],
    }
    report = validate(
        gcs_store,
        spark,
        {
            "ds/t/_config/load.json": json.dumps(config).encode(),
            "ds/t/2024/05/01/part-0.csv": b"id,amount\n1,2\n",
            "ds/t/2024/05/01/_SUCCESS": b"",
        },
    )
    (problem,) = report.problems
    assert problem.object == f"gs://{gcs_store.bucket}/ds/t/2024/05/01/_SUCCESS"
    assert problem.message.startswith("expectations[1].check (amount >= 0) cannot run on this batch: ")
    assert "amount" in problem.message and "UNRESOLVED_COLUMN" in problem.message


def test_validate_checks_types_over_a_schema(spark: Any, gcs_store: GcsStore) -> None:
    config = {
        "schema": "id INT, amount DOUBLE",
        "expectations": [{"name": "not_boolean", "check": "amount + 1", "on_fail": "warn"}],
    }
    report = validate(
        gcs_store,
        spark,
        {
            "ds/t/_config/load.json": json.dumps(config).encode(),
            "ds/t/2024/05/01/part-0.csv": b"id,amount\n1,2\n",
            "ds/t/2024/05/01/_SUCCESS": b"",
        },
    )
    (problem,) = report.problems
    assert problem.message.startswith("expectations[0].check (amount + 1) cannot run on this batch: ")
    assert "boolean" in problem.message
