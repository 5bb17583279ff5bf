"""A CSV file's header against load.json's schema: Spark's default maps columns by position
whatever the header names them, so a file with its columns in another order would load into the
wrong columns without a word. turnstile checks the header (in any case) and fails the batch with the
reason and the way out; `reader_options.enforceSchema: true` keeps the positional mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spark.jobkit import Kit, csv


def test_a_header_naming_the_schemas_columns_in_another_order_fails_the_batch_and_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, schema="id BIGINT, item STRING, qty INT", max_bad_records=5)
    done = kit.run(kit.batch("1", csv("id,qty,item", "101,7,8")))
    assert not done.succeeded
    error = done.error or ""
    assert "reading '1' failed: CSV header does not conform to the schema" in error
    assert "Header: id, qty, item" in error  # the lines of Spark's message, joined on one
    assert "Expected: item but found: qty" in error
    assert f"gs://spark-tests/{kit.prefix}/1/part-0.csv" in error  # the object, not Spark's local copy
    assert "staged" not in error
    assert "reader_options.enforceSchema" in error  # the way out
    assert kit.snapshots() == []


def test_a_header_in_another_case_is_the_same_columns(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id BIGINT, item STRING")
    done = kit.run(kit.batch("1", csv("ID,Item", "1,a", "2,b")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a"), (2, "b")]


def test_enforce_schema_maps_columns_by_position_as_a_bigquery_load_does(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id BIGINT, item STRING", reader_options={"enforceSchema": True})
    done = kit.run(kit.batch("1", csv("Order ID,Item name", "1,a")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a")]


def test_a_bad_row_beside_a_header_that_fits_is_still_set_aside(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema="id BIGINT, item STRING", max_bad_records=1)
    done = kit.run(kit.batch("1", csv("id,item", "1,a", "two,b")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a")]


def test_parquet_files_under_the_default_csv_format_fail_the_batch_naming_the_format(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path)
    done = kit.run(kit.batch("1", ("part-0.parquet", b"PAR1\x00\x01not csv")))
    assert not done.succeeded
    assert (done.error or "").startswith("batch '1': its files are parquet")  # said once, with the batch
    assert '"format": "parquet"' in (done.error or "")
    assert not spark.catalog.tableExists(kit.table)  # nothing was written
