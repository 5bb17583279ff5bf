"""A derived step rebuilt after its source changed, on local Iceberg: `replace_window` replaces the
window's rows in one commit and leaves the others; `overwrite_partitions`, `merge` and
`replace_window` all end equal to the transform over the final sources."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit
from tests.spark.test_steps import H0, H1, fact, result, step_commits
from turnstile.spark import commits, transforms
from turnstile.state.records import BatchOutcome, ManifestBatch, RebuildCause

pytestmark = pytest.mark.spark

DERIVED = {"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["src.orders"]}
WINDOW = DERIVED | {"mode": "replace_window", "time_column": "ts", "partition_by": ["hours(ts)"]}


def rebuild(kit: Kit, rel: str, start: datetime, request: str) -> ManifestBatch:
    """The step as a rebuild's job gets it: a reprocess of the step, with its cause."""
    cause = RebuildCause(table=f"src/orders_{kit.name}", rel=rel, success_generation=9, at=start)
    return kit.step(rel, start).model_copy(
        update={
            "reprocess": request,
            "rebuild": cause,
            "result": f"{kit.prefix}/_turnstile/results/{rel}/1.reprocess-{request}.json",
        }
    )


def change_hour_00(spark: Any, kit: Kit) -> None:
    """The source's hour 00 changes: a row updated, one deleted, one added."""
    orders = f"local.src.orders_{kit.name}"
    spark.sql(f"UPDATE {orders} SET amount = amount + 1 WHERE id = 1")
    spark.sql(f"DELETE FROM {orders} WHERE id = 2")
    spark.sql(f"INSERT INTO {orders} VALUES (TIMESTAMP '2026-01-01 00:30:00', 5, 50.0)")


def transform_rows(spark: Any, kit: Kit, step: ManifestBatch) -> list[tuple[Any, ...]]:
    statement = transforms.filled(step, "local", kit.transform or "")
    return sorted(tuple(r) for r in spark.sql(statement).collect())


def test_replace_window_replaces_the_window_in_one_commit_and_leaves_the_rest(
    spark: Any, tmp_path: Path
) -> None:
    kit = fact(spark, tmp_path, **WINDOW)
    assert kit.run(kit.step("2026/01/01/00", H0), kit.step("2026/01/01/01", H1)).succeeded
    hour_01 = [r for r in kit.rows("ts") if r[0] >= datetime(2026, 1, 1, 1)]
    before = len(kit.snapshots())
    change_hour_00(spark, kit)
    redo = rebuild(kit, "2026/01/01/00", H0, "20260101T013000000000Z-rebuild-0123456789abcdef")
    done = kit.run(redo, job_id="job-2")
    assert done.succeeded, done.error
    assert list(done.outcomes.values()) == [BatchOutcome.REBUILT]
    recorded = result(kit, redo)
    assert recorded.cause == redo.rebuild and recorded.outcome is BatchOutcome.REBUILT
    snapshots = kit.snapshots()
    assert len(snapshots) == before + 1  # one commit: the delete and the append together
    operation = spark.sql(
        f"SELECT operation FROM {kit.table}.snapshots ORDER BY committed_at DESC LIMIT 1"
    ).first()[0]
    assert operation == "overwrite"
    assert snapshots[-1][commits.BATCH_KEY] == f"2026/01/01/00#1#reprocess-{redo.reprocess}"
    assert kit.rows("ts") == [
        (datetime(2026, 1, 1, 0, 0), 1, 22.0),
        (datetime(2026, 1, 1, 0, 30), 5, 100.0),
        *hour_01,
    ]
    # The same request again (made again after it was applied): skipped, nothing written.
    again = kit.run(redo, job_id="job-3")
    assert list(again.outcomes.values()) == [BatchOutcome.SKIPPED]
    assert len(kit.snapshots()) == before + 1


@pytest.mark.parametrize(
    "load",
    [
        DERIVED | {"mode": "overwrite_partitions", "partition_by": ["hours(ts)"]},
        DERIVED | {"mode": "merge", "merge_keys": ["id"]},
        WINDOW,
    ],
    ids=["overwrite_partitions", "merge", "replace_window"],
)
def test_a_rebuilt_step_equals_the_transform_over_the_final_sources(
    spark: Any, tmp_path: Path, load: dict[str, Any]
) -> None:
    kit = fact(spark, tmp_path, **load)
    assert kit.run(kit.step("2026/01/01/00", H0), kit.step("2026/01/01/01", H1)).succeeded
    spark.sql(f"UPDATE local.src.orders_{kit.name} SET amount = amount + 1 WHERE id = 1")
    spark.sql(f"INSERT INTO local.src.orders_{kit.name} VALUES (TIMESTAMP '2026-01-01 00:30:00', 5, 50.0)")
    redo = rebuild(kit, "2026/01/01/00", H0, "20260101T013000000000Z-rebuild-fedcba9876543210")
    assert kit.run(redo, job_id="job-2").succeeded
    window = [r for r in kit.rows("id") if r[0] < datetime(2026, 1, 1, 1)]
    assert sorted(window) == transform_rows(spark, kit, redo)
    assert step_commits(kit)[-1].endswith(f"#reprocess-{redo.reprocess}")


def test_a_step_whose_rows_leave_its_window_is_refused_and_nothing_is_written(
    spark: Any, tmp_path: Path
) -> None:
    kit = fact(spark, tmp_path, **WINDOW)
    kit.transform = f"SELECT ts, id, amount FROM local.src.orders_{kit.name}"  # no window filter
    step = kit.step("2026/01/01/00", H0)
    done = kit.run(step)
    assert list(done.outcomes.values()) == [BatchOutcome.FAILED]
    error = result(kit, step).error or ""
    assert "transform.sql returned rows whose ts is outside the window" in error
    assert "nothing was written" in error
    assert not spark.catalog.tableExists(kit.table) or kit.snapshots() == []


def test_a_table_whose_files_straddle_the_window_fails_the_step_with_the_fix(
    spark: Any, tmp_path: Path
) -> None:
    kit = fact(spark, tmp_path, **WINDOW)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS local.ds")
    spark.sql(f"CREATE TABLE {kit.table} (ts TIMESTAMP, id INT, amount_eur DOUBLE) USING iceberg")
    spark.sql(
        "SELECT * FROM VALUES (TIMESTAMP '2026-01-01 00:10:00', 7, 1.0D), "
        "(TIMESTAMP '2026-01-01 01:10:00', 8, 1.0D) AS v(ts, id, amount_eur)"
    ).coalesce(1).writeTo(kit.table).append()  # one file of both hours, no partition spec
    step = kit.step("2026/01/01/00", H0)
    done = kit.run(step)
    assert list(done.outcomes.values()) == [BatchOutcome.FAILED]
    error = result(kit, step).error or ""
    assert f"Iceberg cannot replace the window of {kit.table} by whole files" in error, error
    assert f"ALTER TABLE {kit.table} ADD PARTITION FIELD hours(ts)" in error
    assert len(kit.rows()) == 2
