"""A derived table's steps on local Iceberg: transform.sql over committed source tables for each
window, written in the table's mode, one tagged commit per step, skipped when already committed,
and failures that name the SQL file and the step."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit
from turnstile.spark import commits, transforms
from turnstile.state.records import BatchOutcome, BatchResult, ManifestBatch

pytestmark = pytest.mark.spark

COMMITTED, SKIPPED, FAILED = BatchOutcome.COMMITTED, BatchOutcome.SKIPPED, BatchOutcome.FAILED
H0 = datetime(2026, 1, 1, 0, tzinfo=UTC)
H1 = datetime(2026, 1, 1, 1, tzinfo=UTC)

HOURLY_FACT = """
SELECT o.ts, o.id, o.amount * r.rate AS amount_eur
FROM ${catalog}.src.orders_NAME o JOIN ${catalog}.src.rates_NAME r
  ON date_trunc('HOUR', o.ts) = r.hour
WHERE o.ts >= ${window_start} AND o.ts < ${window_end}
"""


def sources(spark: Any, name: str) -> None:
    """Two committed source tables: orders at the window edges of 00:00-02:00, hourly rates."""
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.src")
    spark.sql(f"CREATE TABLE local.src.orders_{name} (ts TIMESTAMP, id INT, amount DOUBLE) USING iceberg")
    spark.sql(f"CREATE TABLE local.src.rates_{name} (hour TIMESTAMP, rate DOUBLE) USING iceberg")
    spark.sql(
        f"INSERT INTO local.src.orders_{name} VALUES "
        "(TIMESTAMP '2025-12-31 23:59:59', 0, 1.0), (TIMESTAMP '2026-01-01 00:00:00', 1, 10.0), "
        "(TIMESTAMP '2026-01-01 00:59:59', 2, 20.0), (TIMESTAMP '2026-01-01 01:00:00', 3, 30.0), "
        "(TIMESTAMP '2026-01-01 02:00:00', 4, 40.0)"
    )
    spark.sql(
        f"INSERT INTO local.src.rates_{name} VALUES (TIMESTAMP '2025-12-31 23:00:00', 1.0), "
        "(TIMESTAMP '2026-01-01 00:00:00', 2.0), (TIMESTAMP '2026-01-01 01:00:00', 3.0), "
        "(TIMESTAMP '2026-01-01 02:00:00', 4.0)"
    )


def fact(spark: Any, tmp: Path, **load: Any) -> Kit:
    kit = Kit(spark, tmp, **load)
    sources(spark, kit.name)
    kit.transform = HOURLY_FACT.replace("NAME", kit.name)
    kit.transform_source = f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql"
    return kit


def result(kit: Kit, batch: ManifestBatch) -> BatchResult:
    found = kit.store.read(batch.result)
    assert found is not None
    return BatchResult.decode(found.data, batch.result)


def step_commits(kit: Kit) -> list[str]:
    """The turnstile.batch of every snapshot of the derived table, oldest first."""
    return [summary[commits.BATCH_KEY] for summary in kit.snapshots()]


def test_steps_build_the_window_rows_once_each_in_order(spark: Any, tmp_path: Path) -> None:
    kit = fact(spark, tmp_path)
    first, second = kit.step("2026/01/01/00", H0), kit.step("2026/01/01/01", H1)
    done = kit.run(first, second)
    assert done.succeeded, done.error
    assert list(done.outcomes.values()) == [COMMITTED, COMMITTED]
    # [start, end): 00:00:00 is in the first step, 01:00:00 in the second, 02:00:00 in neither.
    assert kit.rows("id") == [
        (datetime(2026, 1, 1, 0, 0), 1, 20.0),
        (datetime(2026, 1, 1, 0, 59, 59), 2, 40.0),
        (datetime(2026, 1, 1, 1, 0), 3, 90.0),
    ]
    assert step_commits(kit) == ["2026/01/01/00#1", "2026/01/01/01#1"]
    recorded = result(kit, second)
    assert (recorded.outcome, recorded.rows_read, recorded.rows_written) == (COMMITTED, 1, 1)
    assert recorded.snapshot_id == int(
        spark.sql(f"SELECT snapshot_id FROM {kit.table}.snapshots ORDER BY committed_at DESC").first()[0]
    )

    again = kit.run(first, second, job_id="job-2")  # a rerun of the same steps commits nothing
    assert list(again.outcomes.values()) == [SKIPPED, SKIPPED]
    assert step_commits(kit) == ["2026/01/01/00#1", "2026/01/01/01#1"]
    assert len(kit.rows()) == 3


def test_an_empty_window_is_still_one_tagged_commit(spark: Any, tmp_path: Path) -> None:
    kit = fact(spark, tmp_path)
    empty = kit.step("2026/01/01/05", datetime(2026, 1, 1, 5, tzinfo=UTC))
    done = kit.run(empty)
    assert done.succeeded, done.error
    assert kit.rows() == []
    assert step_commits(kit) == ["2026/01/01/05#1"]  # so a rerun knows the step is done
    assert list(kit.run(empty, job_id="job-2").outcomes.values()) == [SKIPPED]


@pytest.mark.parametrize(
    "load",
    [
        {"mode": "overwrite_partitions", "partition_by": ["hours(ts)"]},
        {"mode": "merge", "merge_keys": ["id"]},
    ],
    ids=["overwrite_partitions", "merge"],
)
def test_a_step_applied_again_after_its_source_changed_replaces_its_rows(
    spark: Any, tmp_path: Path, load: dict[str, Any]
) -> None:
    kit = fact(spark, tmp_path, **load)
    assert kit.run(kit.step("2026/01/01/00", H0), kit.step("2026/01/01/01", H1)).succeeded
    spark.sql(f"UPDATE local.src.orders_{kit.name} SET amount = amount + 1 WHERE id = 1")
    redo = kit.step("2026/01/01/00", H0, generation=2)  # the step queued again (a reprocess)
    done = kit.run(redo, job_id="job-2")
    assert done.succeeded, done.error
    assert kit.rows("id") == [
        (datetime(2026, 1, 1, 0, 0), 1, 22.0),
        (datetime(2026, 1, 1, 0, 59, 59), 2, 40.0),
        (datetime(2026, 1, 1, 1, 0), 3, 90.0),  # the other hour is left as it was
    ]
    assert step_commits(kit) == ["2026/01/01/00#1", "2026/01/01/01#1", "2026/01/01/00#2"]


def test_the_window_is_utc_whatever_the_session_time_zone(spark: Any, tmp_path: Path) -> None:
    kit = fact(spark, tmp_path)
    step = kit.step("2026/01/01/00", H0)
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        statement = transforms.filled(step, "local", kit.transform or "")
        assert "TIMESTAMP '2026-01-01 00:00:00+00:00'" in statement
        assert "TIMESTAMP '2026-01-01 01:00:00+00:00'" in statement
        ids = [row["id"] for row in spark.sql(statement).collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert sorted(ids) == [1, 2]


@pytest.mark.parametrize(
    ("transform", "problem"),
    [
        ("SELECT ts, id FORM ${catalog}.src.orders_NAME", "PARSE_SYNTAX_ERROR"),
        ("SELECT * FROM ${catalog}.src.nothing_NAME WHERE ts >= ${window_start}", "nothing_"),
        ("SELECT raise_error('no rate for this hour') AS id FROM ${catalog}.src.orders_NAME", "no rate"),
    ],
    ids=["syntax-error", "unknown-table", "fails-while-running"],
)
def test_a_failing_transform_names_its_file_and_the_step_and_commits_nothing(
    spark: Any, tmp_path: Path, transform: str, problem: str
) -> None:
    kit = fact(spark, tmp_path)
    kit.transform = transform.replace("NAME", kit.name)
    step = kit.step("2026/01/01/00", H0)
    done = kit.run(step)
    assert list(done.outcomes.values()) == [FAILED]
    error = result(kit, step).error or ""
    assert error.startswith(
        f"{kit.transform_source} fails on step '2026/01/01/00' [2026-01-01T00:00:00Z, 2026-01-01T01:00:00Z): "
    ), error
    assert problem in error
    assert "\n" not in error
    assert error.endswith("then apply the step again (turnstile status shows the command)")
    assert not spark.catalog.tableExists(kit.table)


def test_a_dml_transform_or_none_at_all_is_refused_with_what_to_do(spark: Any, tmp_path: Path) -> None:
    kit = fact(spark, tmp_path, table_schema="ts TIMESTAMP, id INT")
    kit.transform = "INSERT INTO ${table} SELECT ts, id FROM ${catalog}.src.orders_NAME".replace(
        "NAME", kit.name
    )
    step = kit.step("2026/01/01/00", H0)
    kit.run(step)
    error = result(kit, step).error or ""
    assert error.startswith(
        f"{kit.transform_source} of derived table {kit.prefix} is an INSERT statement, not a SELECT"
    )
    assert "rewrite it as that SELECT" in error

    kit.transform = None
    bare = kit.step("2026/01/01/01", H1)
    kit.run(bare, job_id="job-2")
    assert (result(kit, bare).error or "").startswith(
        f"derived table {kit.prefix} has no transform.sql, so step '2026/01/01/01' "
        f"[2026-01-01T01:00:00Z, 2026-01-01T02:00:00Z) has nothing to run: upload "
        f"gs://{BUCKET}/{kit.prefix}/_config/transform.sql"
    )
    assert not spark.catalog.tableExists(kit.table)


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        (
            "CREATE TABLE ${table} USING iceberg AS SELECT * FROM ${catalog}.src.orders_NAME",
            "a CREATE TABLE AS SELECT statement",
        ),
        ("DROP TABLE ${catalog}.src.orders_NAME", "a DROP TABLE statement"),
        (
            "CALL ${catalog}.system.rollback_to_snapshot(table => 'src.orders_NAME', snapshot_id => FIRST)",
            "a CALL statement",
        ),
        (
            "WITH o AS (SELECT ts, id FROM ${catalog}.src.orders_NAME WHERE ts >= ${window_start})\n"
            "INSERT INTO ${table} SELECT * FROM o",
            "an INSERT statement",
        ),
    ],
    ids=["create-table", "drop-table", "call", "with-insert"],
)
def test_a_step_s_transform_that_is_not_a_select_is_refused_naming_its_file_and_kind(
    spark: Any, tmp_path: Path, statement: str, kind: str
) -> None:
    kit = fact(spark, tmp_path, table_schema="ts TIMESTAMP, id INT")
    orders = f"local.src.orders_{kit.name}"
    first = spark.sql(f"SELECT snapshot_id FROM {orders}.snapshots ORDER BY committed_at").first()[0]
    spark.sql(f"INSERT INTO {orders} VALUES (TIMESTAMP '2026-01-01 00:30:00', 9, 90.0)")
    kit.transform = statement.replace("NAME", kit.name).replace("FIRST", str(first))
    step = kit.step("2026/01/01/00", H0)
    done = kit.run(step)
    assert list(done.outcomes.values()) == [FAILED]
    assert result(kit, step).error == (
        f"{kit.transform_source} of derived table {kit.prefix} is {kind}, not a SELECT; a derived "
        "table's transform.sql is a SELECT of the step's rows, written in the table's mode (append, "
        "merge with merge_keys, overwrite_partitions): rewrite it as that SELECT"
    )
    assert spark.sql(f"SELECT count(*) FROM {orders}").first()[0] == 6  # neither dropped nor rolled back
    assert not spark.catalog.tableExists(kit.table)


def test_a_second_statement_in_a_step_s_transform_is_refused_naming_its_file(
    spark: Any, tmp_path: Path
) -> None:
    kit = fact(spark, tmp_path)
    kit.transform = f"SELECT ts, id FROM local.src.orders_{kit.name}; DROP TABLE local.src.orders_{kit.name}"
    step = kit.step("2026/01/01/00", H0)
    kit.run(step)
    assert result(kit, step).error == (
        f"{kit.transform_source} must hold one statement (a SELECT over `batch`, or one "
        "MERGE/UPDATE/DELETE/INSERT); it holds several"
    )
    assert spark.catalog.tableExists(f"local.src.orders_{kit.name}")


def test_an_unknown_placeholder_in_a_step_lists_the_window_ones_too(spark: Any, tmp_path: Path) -> None:
    kit = fact(spark, tmp_path)
    kit.transform = "SELECT ${windw_start} AS ts"
    step = kit.step("2026/01/01/00", H0)
    kit.run(step)
    assert (result(kit, step).error or "").endswith(
        "known: ${table}, ${catalog}, ${dataset}, ${table_name}, ${rel}, ${generation}, "
        "${window_start}, ${window_end}"
    )
