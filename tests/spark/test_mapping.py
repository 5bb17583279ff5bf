"""load.json's `mapping` applied by the real job on local Spark, written to real Iceberg tables."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import BUCKET, Kit, csv
from turnstile.core.errors import BatchFailed, CorruptRecord
from turnstile.state.records import BatchOutcome, BatchResult, ManifestBatch

pytestmark = pytest.mark.spark

EVERY_KIND = [
    {"rename": "payload.user.id", "to": "user_id"},  # out of a nested struct (user then empty: gone)
    {"remove": "debug"},
    {"cast": "amount", "type": "decimal(10,2)"},
    {"cast": "payload.count", "type": "int"},  # a nested field cast in place
    {"constant": "source", "value": "web"},
    {"default": "country", "value": "US"},
    {"from_path": "time", "to": "batch_hour"},
    {"from_path": "regex", "regex": r"/(?P<part>b[0-9]+)$", "group": "part", "to": "part"},
]


def jsonl(*rows: dict[str, Any]) -> tuple[str, bytes]:
    return ("part-0.json", "".join(json.dumps(row) + "\n" for row in rows).encode())


def result(kit: Kit, batch: ManifestBatch) -> BatchResult:
    found = kit.store.read(batch.result)
    assert found is not None
    return BatchResult.decode(found.data, batch.result)


def bad_rows(kit: Kit, batch: ManifestBatch) -> list[dict[str, Any]]:
    found = kit.store.read(f"{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl")
    assert found is not None
    return [json.loads(line) for line in found.text().splitlines()]


def row(n: int, amount: str, country: str | None, count: str = "1") -> dict[str, Any]:
    return {
        "id": n,
        "amount": amount,
        "country": country,
        "debug": "x",
        "payload": {"user": {"id": 100 + n}, "count": count},
    }


def test_a_mapping_of_every_kind_shapes_the_rows_written(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="json", mapping=EVERY_KIND, max_bad_records=1)
    batch = kit.batch(
        "2026/11/23/14/b7",
        jsonl(row(1, "1.50", "FR"), row(2, "2", None, count="7"), row(3, "lots", "DE")),
    )
    done = kit.run(batch)
    assert done.succeeded, done.error
    columns = [x.name for x in spark.table(kit.table).schema.fields]
    assert columns == ["amount", "country", "id", "payload", "user_id", "source", "batch_hour", "part"]
    hour = datetime(2026, 11, 23, 14)  # the session reads timestamps in UTC
    rows = [r.asDict(recursive=True) for r in spark.table(kit.table).orderBy("id").collect()]
    assert rows == [
        {
            "amount": Decimal("1.50"),
            "country": "FR",
            "id": 1,
            "payload": {"count": 1},
            "user_id": 101,
            "source": "web",
            "batch_hour": hour,
            "part": "b7",
        },
        {
            "amount": Decimal("2.00"),
            "country": "US",
            "id": 2,
            "payload": {"count": 7},
            "user_id": 102,
            "source": "web",
            "batch_hour": hour,
            "part": "b7",
        },
    ]
    # The row whose amount does not convert is a bad row: counted, and set aside naming the entry.
    got = result(kit, batch)
    assert (got.outcome, got.rows_read, got.rows_written, got.bad_rows) == (BatchOutcome.COMMITTED, 3, 2, 1)
    (line,) = bad_rows(kit, batch)
    assert json.loads(line["row"])["amount"] == "lots"
    assert line["column"] == "amount" and line["value"] == "lots"
    assert line["reason"] == "mapping[2] (cast 'amount'): field 'amount' (decimal(10,2)) cannot hold 'lots'"


def test_a_failing_cast_over_the_limit_fails_the_batch_naming_the_field(spark: Any, tmp_path: Path) -> None:
    mapping = [{"cast": "payload.count", "type": "int"}]
    kit = Kit(spark, tmp_path, format="json", mapping=mapping)  # max_bad_records: 0
    batch = kit.batch("1", jsonl(row(1, "1", "FR"), row(2, "1", "FR", count="seven")))
    with pytest.raises(CorruptRecord) as caught:
        kit.applier().apply(batch, "job-1")
    where = f"gs://{BUCKET}/{batch.failed_prefix}bad-rows-{batch.success_generation}.jsonl"
    message = str(caught.value)
    assert message.startswith(
        "1 row(s) could not be parsed or cast (max_bad_records is 0); the first: mapping[0] "
        "(cast 'payload.count'): field 'payload.count' (int) cannot hold 'seven'"
    )
    assert where in message and "mapping in load.json" in message
    assert caught.value.column == "payload.count"
    assert [line["value"] for line in bad_rows(kit, batch)] == ["seven"]
    assert not spark.catalog.tableExists(kit.table)  # nothing written


def test_rows_that_do_not_parse_and_rows_that_do_not_cast_share_one_budget(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(
        spark,
        tmp_path,
        schema="id INT, v STRING",
        mapping=[{"cast": "v", "type": "int"}],
        max_bad_records=2,
    )
    batch = kit.batch("1", csv("id,v", "1,10", "x,20", "3,thirty", "4,40"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (4, 40)]
    assert result(kit, batch).bad_rows == 2
    lines = bad_rows(kit, batch)
    assert [(line["row"], line["column"]) for line in lines] == [
        ("x,20", "id"),
        ('{"id":3,"v":"thirty"}', "v"),
    ]


def test_an_entry_whose_field_the_batch_lacks_fails_before_any_row_is_written(
    spark: Any, tmp_path: Path
) -> None:
    kit = Kit(spark, tmp_path, format="json", mapping=[{"rename": "payload.user.name", "to": "name"}])
    where = f"gs://{BUCKET}/{kit.prefix}/_config/load.json"
    batch = kit.batch("1", jsonl(row(1, "1", "FR"))).model_copy(update={"mapping_source": where})
    with pytest.raises(BatchFailed) as caught:
        kit.applier().apply(batch, "job-1")
    assert str(caught.value) == (
        f"the mapping in {where} does not fit batch '1': mapping[0] (rename 'payload.user.name'): "
        "field 'payload.user' has no field 'name' (it has: id); fix the entry or an entry before it, "
        "or the data"
    )


def test_a_time_from_a_path_that_names_none_fails_the_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, mapping=[{"from_path": "time", "to": "hour"}])
    batch = kit.batch("b1", csv("id", "1"))
    with pytest.raises(
        BatchFailed, match=r"mapping\[0\] \(from_path 'time'\): the batch's path 'b1' names no"
    ):
        kit.applier().apply(batch, "job-1")


def test_transform_sql_reads_the_mapped_batch(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, mapping=[{"rename": "v", "to": "value"}, {"constant": "k", "value": 2}])
    kit.transform = "SELECT id, value * k AS doubled FROM batch"
    done = kit.run(kit.batch("1", csv("id,v", "1,5", "2,6")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 10), (2, 12)]


def test_defaults_constants_with_types_and_the_rel(spark: Any, tmp_path: Path) -> None:
    mapping = [
        {"default": "score", "value": 0, "type": "int"},  # not in the batch: added
        {"constant": "note", "value": None, "type": "string"},
        {"from_path": "rel", "to": "batch"},
    ]
    kit = Kit(spark, tmp_path, mapping=mapping)
    done = kit.run(kit.batch("incremental/b1", csv("id", "1")))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, 0, None, "incremental/b1")]
    assert [x.dataType.simpleString() for x in spark.table(kit.table).schema.fields] == [
        "int",
        "int",
        "string",
        "string",
    ]


def test_a_typed_default_converts_the_batchs_own_values_and_sets_aside_those_that_do_not(
    spark: Any, tmp_path: Path
) -> None:
    mapping = [{"default": "amount", "value": 0, "type": "double"}]
    kit = Kit(spark, tmp_path, mapping=mapping, reader_options={"inferSchema": False}, max_bad_records=1)
    batch = kit.batch("1", csv("id,amount", "1,12.5", "2,12.5x", "3,"))
    done = kit.run(batch)
    assert done.succeeded, done.error
    assert kit.rows() == [("1", 12.5), ("3", 0.0)]  # 12.5x is not replaced by the default: a bad row
    [line] = bad_rows(kit, batch)
    assert (line["column"], line["value"]) == ("amount", "12.5x")
    assert line["reason"] == "mapping[0] (default 'amount'): field 'amount' (double) cannot hold '12.5x'"
    assert result(kit, batch).bad_rows == 1


def test_a_mapping_spark_cannot_apply_fails_the_batch_naming_the_mapping(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="json", mapping=[{"default": "payload", "value": "none"}])
    batch = kit.batch("1", jsonl(row(1, "1", "FR")))
    with pytest.raises(
        BatchFailed, match=r"^the mapping in load.json fails on batch '1': .*; fix the mapping$"
    ):
        kit.applier().apply(batch, "job-1")


def test_a_typed_constant_spark_cannot_convert_fails_the_batch_instead_of_writing_nulls(
    spark: Any, tmp_path: Path
) -> None:
    # Passes load.json's own check (the zone is not modelled there), but Spark's cast gives null.
    mapping = [{"constant": "at", "value": "2024-05-01 13:00:00 nowhere", "type": "timestamp"}]
    kit = Kit(spark, tmp_path, mapping=mapping)
    batch = kit.batch("1", csv("id", "1"))
    with pytest.raises(BatchFailed, match=r"mapping\[0\] \(constant 'at'\): the value cannot be of its type"):
        kit.applier().apply(batch, "job-1")
