"""Batches of no rows: files that are all empty (zero bytes) and, with a `schema`, header-only files.

A batch whose files hold no columns cannot create its table (the failure says why and what to do);
a table that exists, or one `table_schema` creates, takes it as a commit of no rows in its own
columns, which records the batch (docs/CONFIGURATION.md, Batch folders).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit
from turnstile.spark import commits
from turnstile.state.records import BatchOutcome

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(("fmt", "name"), [("csv", "part-0.csv"), ("json", "part-0.json")])
def test_empty_files_cannot_create_a_table_and_the_failure_says_what_to_do(
    spark: Any, tmp_path: Path, fmt: str, name: str
) -> None:
    kit = Kit(spark, tmp_path, format=fmt)
    done = kit.run(kit.batch("1", (name, b""), ("part-1." + fmt, b"")))
    assert done.outcomes["1"] is BatchOutcome.FAILED
    assert done.error == (
        f"batch '1': its files in gs://{BUCKET}/{kit.prefix}/1/ hold no columns (they are empty), so "
        f"there is nothing to create {kit.table} from; upload the batch's data (then its _SUCCESS "
        'again), or set "schema" (the files\' columns) or "table_schema" (the table\'s) in its '
        "_config/load.json"
    )
    assert not commits.table_exists(spark, kit.table)


def test_table_schema_creates_the_table_from_an_empty_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, v STRING")
    done = kit.run(kit.batch("1", ("part-0.csv", b"")))
    assert done.succeeded, done.error
    assert kit.rows() == []
    assert [(f.name, f.dataType.simpleString()) for f in spark.table(kit.table).schema.fields] == [
        ("id", "int"),
        ("v", "string"),
    ]
    assert kit.snapshots()[-1]["turnstile.rel"] == "1"


@pytest.mark.parametrize(
    ("load", "after"),
    [
        ({"mode": "append"}, [(1, "a")]),
        ({"mode": "overwrite"}, []),  # the batch's no rows replace the table's
        ({"mode": "overwrite_partitions", "partition_by": ["v"]}, [(1, "a")]),
        ({"mode": "merge", "merge_keys": ["id"], "delete_column": "gone"}, [(1, "a")]),
    ],
)
def test_an_empty_batch_commits_no_rows_to_an_existing_table(
    spark: Any, tmp_path: Path, load: dict[str, Any], after: list[tuple[Any, ...]]
) -> None:
    # The mapping and transform.sql name fields an empty batch does not have: neither runs on it.
    kit = Kit(spark, tmp_path, mapping=[{"rename": "name", "to": "v"}], time_column="id", **load)
    kit.transform = "SELECT id, lower(v) AS v" + (", gone" if "delete_column" in load else "") + " FROM batch"
    first = b"id,name,gone\n1,A,false\n" if "delete_column" in load else b"id,name\n1,A\n"
    assert kit.run(kit.batch("1", ("part-0.csv", first))).succeeded
    done = kit.run(kit.batch("2", ("part-0.csv", b""), ("part-1.csv", b"")))
    assert done.succeeded, done.error
    assert done.outcomes["2"] is BatchOutcome.COMMITTED
    assert kit.rows() == after
    assert kit.snapshots()[-1]["turnstile.rel"] == "2"  # the batch is recorded as applied


def test_a_partition_overwrite_of_no_rows_is_recorded_and_changes_nothing(spark: Any, tmp_path: Path) -> None:
    # Iceberg skips the commit of a dynamic overwrite that replaces no partition.
    kit = Kit(spark, tmp_path, mode="overwrite_partitions", partition_by=["v"], schema="id INT, v STRING")
    assert kit.run(kit.batch("1", ("part-0.csv", b"id,v\n1,a\n"))).succeeded
    done = kit.run(kit.batch("2", ("part-0.csv", b"id,v\n")))  # header only: columns, no rows
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a")]
    assert kit.snapshots()[-1]["turnstile.rel"] == "2"
