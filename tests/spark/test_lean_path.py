"""The lean read: a batch written as read is read once, in FAILFAST, neither cached nor counted; a
row that does not parse fails that write before any commit, and the batch is read again the careful
way (bad rows set aside, counted, the limit applied), still one commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from turnstile.spark import applier, reading
from turnstile.state.records import BatchResult


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """`strict` of every read the applier makes, in order."""
    seen: list[bool] = []
    original = reading.read

    def recording(*args: Any, **kwargs: Any) -> reading.ReadBatch:
        seen.append(bool(kwargs.get("strict")))
        return original(*args, **kwargs)

    monkeypatch.setattr(applier.reading, "read", recording)
    return seen


def result_of(kit: Kit, rel: str, generation: int) -> BatchResult:
    found = kit.store.read(f"{kit.prefix}/_turnstile/results/{rel}/{generation}.json")
    assert found is not None
    return BatchResult.decode(found.data, "result")


def test_a_clean_batch_is_read_once_strictly_and_counted_from_its_commit(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING")
    batch = kit.batch("1", csv("id,v", "1,a", "2,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert reads == [True]
    got = result_of(kit, "1", batch.success_generation)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 3, 0)
    assert kit.rows() == [(1, "a"), (2, "b"), (3, "c")]


def test_a_row_that_does_not_parse_sends_the_batch_to_the_careful_read_with_one_commit(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", max_bad_records=1)
    batch = kit.batch("1", csv("id,v", "1,a", "two,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert reads == [True, False]
    got = result_of(kit, "1", batch.success_generation)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 2, 1)
    assert kit.rows() == [(1, "a"), (3, "c")]
    assert len(kit.snapshots()) == 1  # the failed strict write committed nothing


def test_a_short_row_is_a_bad_row_after_the_strict_read_fails(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING")  # max_bad_records: 0
    batch = kit.batch("1", csv("id,v", "1,a", "2"))
    done = kit.run(batch)
    assert not done.succeeded
    assert reads == [True, False]
    assert kit.snapshots() == []


@pytest.mark.parametrize(
    ("load", "transform"),
    [
        ({"mode": "merge", "merge_keys": ["id"]}, None),
        ({"jagged_rows": True}, None),
        ({"mapping": [{"cast": "v", "type": "int"}]}, None),
        ({}, "SELECT id, upper(v) AS v FROM batch"),
    ],
    ids=["merge", "jagged_rows", "mapping-cast", "transform"],
)
def test_batches_not_written_as_read_take_the_careful_read(
    spark: Any, tmp_path: Path, reads: list[bool], load: dict[str, Any], transform: str | None
) -> None:
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", **load)
    kit.transform = transform
    done = kit.run(kit.batch("1", csv("id,v", "1,7", "2,8")))
    assert done.succeeded, done.error
    assert reads == [False]


def test_a_batch_in_another_column_order_and_case_lands_in_the_tables_columns(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    kit = Kit(spark, tmp_path)
    first = kit.batch("1", csv("id,v", "1,a"), schema="id INT, v STRING")
    # The same columns shuffled and upper-cased, then one with `v` only: shaped to the table.
    second = kit.batch("2", csv("V,ID", "b,2"), schema="V STRING, ID INT")
    third = kit.batch("3", csv("v", "c"), schema="v STRING")
    done = kit.run(first, second, third)
    assert done.succeeded, done.error
    assert reads == [True, True, True]
    assert kit.rows() == [(None, "c"), (1, "a"), (2, "b")]
    assert [(x.name, x.dataType.simpleString()) for x in spark.table(kit.table).schema.fields] == [
        ("id", "int"),
        ("v", "string"),
    ]


def test_a_schema_in_pysparks_colon_form_is_read_on_the_lean_path(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    kit = Kit(spark, tmp_path, schema="id: int, v: string")
    done = kit.run(kit.batch("1", csv("id,v", "1,a", "2,b")))
    assert done.succeeded, done.error
    assert reads == [True]
    assert kit.rows() == [(1, "a"), (2, "b")]


def test_a_row_that_does_not_parse_while_the_expectations_count_sends_the_batch_to_the_careful_read(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    # The expectations' count is the lean read's first pass: its failure is the write's.
    expectations = [{"name": "small", "check": "id < 3", "on_fail": "drop"}]
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", max_bad_records=1, expectations=expectations)
    batch = kit.batch("1", csv("id,v", "1,a", "two,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert reads == [True, False]
    got = result_of(kit, "1", batch.success_generation)
    assert (got.rows_read, got.rows_written, got.bad_rows) == (3, 1, 1)
    assert [(c.name, c.failed_rows) for c in got.expectations] == [("small", 1)]
    assert kit.rows() == [(1, "a")]
    assert len(kit.snapshots()) == 1


def test_a_clean_lean_read_counts_the_rows_its_expectations_checked(
    spark: Any, tmp_path: Path, reads: list[bool]
) -> None:
    expectations = [{"name": "small", "check": "id < 3", "on_fail": "drop"}]
    kit = Kit(spark, tmp_path, schema="id INT, v STRING", expectations=expectations)
    batch = kit.batch("1", csv("id,v", "1,a", "2,b", "3,c"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert reads == [True]
    got = result_of(kit, "1", batch.success_generation)
    assert (got.rows_read, got.rows_written) == (3, 2)
