"""How text files are read, with and without a `schema` in load.json: as a BigQuery load reads them
(RFC 4180 quotes, line breaks inside quoted fields), and never silently otherwise. A row that does
not parse is a bad row whether or not the config names the columns; the files of one batch are read
by their own headers; a column the table already has is read as the table's type."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.spark.jobkit import Kit, csv
from turnstile.state.records import BatchResult


def text(name: str, *lines: str) -> tuple[str, bytes]:
    return (name, ("\n".join(lines) + "\n").encode())


def test_a_quoted_field_holding_a_line_break_and_doubled_quotes_is_one_value(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's defaults cut the row at the line break (a truncated value, then a fragment committed
    as a row of its own) and kept `""` as two quotes."""
    for schema in (None, "id INT, name STRING, note STRING"):
        kit = Kit(spark, tmp_path, **({"schema": schema} if schema else {}))
        done = kit.run(
            kit.batch(
                "1",
                csv("id,name,note", '1,"Smith, John","line1', 'line2"', '2,plain,"he said ""hi"""', "3,x,y"),
            )
        )
        assert done.succeeded, done.error
        assert kit.rows() == [(1, "Smith, John", "line1\nline2"), (2, "plain", 'he said "hi"'), (3, "x", "y")]


def test_a_csv_row_with_more_fields_than_the_header_is_a_bad_row_without_a_schema_too(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path)
    done = kit.run(kit.batch("1", csv("id,a", "1,x", "2,y,EXTRA")))
    assert not done.succeeded
    assert "1 row(s) could not be parsed (max_bad_records is 0)" in (done.error or "")
    assert kit.snapshots() == []
    [bad] = kit.store.list_objects(f"{kit.prefix}/_failed/1/")
    found = kit.store.read(bad.name)
    assert found is not None and json.loads(found.text())["row"] == "2,y,EXTRA"

    allowed = Kit(spark, tmp_path, max_bad_records=1)
    batch = allowed.batch("1", csv("id,a", "1,x", "2,y,EXTRA"))
    done = allowed.run(batch)
    assert done.succeeded, done.error
    assert allowed.rows() == [(1, "x")]
    recorded = allowed.store.read(batch.result)
    assert recorded is not None
    result = BatchResult.decode(recorded.data, batch.result)
    assert (result.rows_read, result.rows_written, result.bad_rows) == (2, 1, 1)


def test_a_json_line_that_does_not_parse_is_a_bad_row_without_a_schema_not_a_column(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, format="json", max_bad_records=1)
    done = kit.run(
        kit.batch("1", text("part-0.json", '{"id":1,"v":"a"}', '{"id":2,"v":', '{"id":3,"v":"c"}'))
    )
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a"), (3, "c")]
    assert [c.name for c in spark.table(kit.table).schema.fields] == ["id", "v"]  # no `_corrupt_record`

    strict = Kit(spark, tmp_path, format="json")
    array = text("part-0.json", "[", '  {"id": 1, "v": "a"},', '  {"id": 2, "v": "b"}', "]")
    done = strict.run(strict.batch("1", array))
    assert not done.succeeded
    assert "2 row(s) could not be parsed" in (done.error or "")
    assert '"reader_options": {"multiLine": true}' in (done.error or "")  # what such files need
    assert strict.snapshots() == []


def test_files_of_one_batch_whose_headers_order_the_columns_differently_fail_instead_of_swapping_values(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path)
    done = kit.run(
        kit.batch(
            "1",
            text("part-0.csv", "first,last", "Ada,Lovelace"),
            text("part-1.csv", "last,first", "Turing,Alan"),
        )
    )
    assert not done.succeeded
    error = done.error or ""
    assert "CSV header does not conform to the schema" in error
    assert f"gs://spark-tests/{kit.prefix}/1/part-1.csv" in error
    assert "that of the batch's first file" in error
    assert kit.snapshots() == []


def test_a_column_the_table_has_is_read_as_the_tables_type_without_a_schema(
    spark: Any, tmp_path: Path
) -> None:
    """Inferred on its own, `2` was an int that a double column refused (the table blocked), and
    `02134` an int that lost its zero in a string column."""
    kit = Kit(spark, tmp_path)
    assert kit.run(kit.batch("1", csv("id,amount,code", "1,1.5,A1"))).succeeded
    done = kit.run(kit.batch("2", csv("id,amount,code", "2,2,02134")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 1.5, "A1"), (2, 2.0, "02134")]
    assert [(c.name, c.dataType.simpleString()) for c in spark.table(kit.table).schema.fields] == [
        ("id", "int"),
        ("amount", "double"),
        ("code", "string"),
    ]
    # A value the table's type cannot hold is a bad row naming it, where it was a type clash.
    done = kit.run(kit.batch("3", csv("id,amount,code", "x3,3.5,B")))
    assert not done.succeeded
    assert "the first: column 'id' (int) cannot hold 'x3'" in (done.error or "")


def test_a_wider_type_than_the_tables_still_widens_it_under_add_columns(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, schema_evolution="add_columns")
    assert kit.run(kit.batch("1", csv("id,v", "1,a"))).succeeded
    done = kit.run(kit.batch("2", csv("id,v", "3000000000,b")))
    assert done.succeeded, done.error
    assert spark.table(kit.table).schema["id"].dataType.simpleString() == "bigint"
    assert kit.rows() == [(1, "a"), (3000000000, "b")]


def test_a_header_naming_a_column_twice_fails_saying_so(spark: Any, tmp_path: Path) -> None:
    """Spark renamed them `dup1`, `dup2` (by their place), which later batches could not match."""
    kit = Kit(spark, tmp_path)
    done = kit.run(kit.batch("1", csv("id,dup,DUP", "1,a,b")))
    assert not done.succeeded
    error = done.error or ""
    assert "the header names column 'dup' more than once (any case)" in error
    assert f"gs://spark-tests/{kit.prefix}/1/part-0.csv" in error
    assert kit.snapshots() == []


def test_a_bad_row_names_the_object_it_came_from(spark: Any, tmp_path: Path) -> None:
    """Among thirty files, which one holds `x17,bad` was for the operator to grep."""
    kit = Kit(spark, tmp_path, schema="id INT, name STRING")
    files = [text(f"part-{n:04d}.csv", "id,name", f"{n},ok") for n in range(30)]
    files[17] = text("part-0017.csv", "id,name", "17,ok", "x17,bad")
    batch = kit.batch("1", *files)
    done = kit.run(batch)
    assert not done.succeeded
    uri = f"gs://spark-tests/{kit.prefix}/1/part-0017.csv"
    assert f"the first: column 'id' (int) cannot hold 'x17' (row 'x17,bad' in {uri})" in (done.error or "")
    found = kit.store.read(f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl")
    assert found is not None
    [line] = [json.loads(x) for x in found.text().splitlines()]
    assert (line["row"], line["file"]) == ("x17,bad", uri)
