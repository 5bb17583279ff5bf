"""Spark DDL read without Spark: `schema` and `table_schema` in load.json are checked where the
file is read, naming the column and what is wrong, before any batch reaches Spark."""

from __future__ import annotations

import pytest

from turnstile.config import ddl
from turnstile.config.load_config import LoadConfig


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("id BIGINT, name STRING, ts TIMESTAMP", {"id": None, "name": None, "ts": None}),
        ("id: int, v: string", {"id": None, "v": None}),  # PySpark's colon form
        (
            "a DECIMAL(10, 2), b dec, c VARCHAR(3) NOT NULL COMMENT 'x, <y>'",
            {"a": None, "b": None, "c": None},
        ),
        (
            "p STRUCT<user: STRUCT<id: INT>, tags: ARRAY<STRING>>, m MAP<STRING, ARRAY<INT>>",
            {"p": {"user": {"id": None}, "tags": None}, "m": None},
        ),
        ("`weird, name` INT", {"weird, name": None}),
        ("i INTERVAL DAY TO SECOND, j interval year, k timestamp_ntz", {"i": None, "j": None, "k": None}),
        ("s STRUCT<>", {"s": {}}),
    ],
)
def test_what_spark_reads_is_read_into_fields(text: str, fields: ddl.Fields) -> None:
    assert ddl.fields(text) == fields


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id BIGINTT, x STRING", "column 'id': 'BIGINTT' is not a Spark type (Spark's types: array, bigint,"),
        ("", "names no column"),
        ("id", "cannot read 'id' as 'name TYPE'"),
        ("a ARRAY<STRIN>", "column 'a': 'STRIN' is not a Spark type"),
        ("a MAP<STRING>", "column 'a': MAP<STRING> takes a key and a value type"),
        ("a STRUCT<b INT", "column 'a': '<' at '<b INT' is never closed with '>'"),
        ("a VARCHAR", "VARCHAR needs a length"),
        ("a DECIMAL(x)", "DECIMAL(x) takes whole numbers"),
        ("a INT b STRING", "column 'a': 'b STRING' after its type 'INT'"),
        ("a STRUCT<b: blah>", "column 'a': in STRUCT<...>: column 'b': 'blah' is not a Spark type"),
    ],
)
def test_what_spark_would_refuse_is_named_with_its_column(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        ddl.fields(text)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "entry", ["category", "days(ts)", "hours( ts )", "bucket(16, id)", "truncate(4, `a b`)"]
)
def test_iceberg_partition_transforms_are_accepted(entry: str) -> None:
    ddl.partition_transform(entry)


@pytest.mark.parametrize("entry", ["dayz(ts)", "bucket(id)", "days(ts", "a b", ""])
def test_other_partitions_are_refused_with_the_ones_that_exist(entry: str) -> None:
    with pytest.raises(ValueError, match="is not a partition of Iceberg's: write a column, or years"):
        ddl.partition_transform(entry)


@pytest.mark.parametrize(
    ("document", "key"),
    [
        ({"schema": "id BIGINTT"}, "schema"),
        ({"table_schema": "id"}, "table_schema"),
        ({"partition_by": ["dayz(ts)"]}, "partition_by"),
        ({"nested": "yes"}, "nested"),
        ({"jagged_rows": 1}, "jagged_rows"),
        ({"max_bad_records": "5"}, "max_bad_records"),
        ({"max_batches_per_job": 5.0}, "max_batches_per_job"),
    ],
)
def test_load_json_refuses_a_bad_value_under_its_key(document: dict[str, object], key: str) -> None:
    """A string is not a number nor a flag: `"5"`, `"yes"` and 1 are refused, not guessed at."""
    with pytest.raises(ValueError, match=f"(?m)^{key}$"):
        LoadConfig.model_validate(document, context={"partial": True})


@pytest.mark.parametrize(
    ("text", "primitive"),
    [
        ("int", True),
        (" DECIMAL(10, 2) ", True),
        ("varchar(5)", True),
        ("timestamp_ntz", True),
        ("varchar", False),
        ("array<int>", False),
        ("void", False),
        ("intt", False),
        ("int extra", False),
        ("", False),
    ],
)
def test_a_cast_target_is_a_primitive_spark_type(text: str, primitive: bool) -> None:
    assert ddl.is_primitive(text) is primitive
