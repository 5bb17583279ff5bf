"""JSON with a schema: a field the schema lacks would be dropped by Spark's reader without a word
(a misspelt `nme` loses its value). The batch fails naming it, unless `ignore_unknown_values` says
to drop such fields, as BigQuery's option of that name does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit

pytestmark = pytest.mark.spark
SCHEMA = "id BIGINT, name STRING"


def lines(*rows: str) -> tuple[str, bytes]:
    return ("part-0.json", ("\n".join(rows) + "\n").encode())


def test_a_field_the_schema_lacks_fails_the_batch_naming_it(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="json", schema=SCHEMA, max_bad_records=5)
    done = kit.run(kit.batch("1", lines('{"id": 1, "name": "a"}', '{"id": 2, "nme": "typo"}')))
    assert not done.succeeded
    assert (
        done.error is not None and "batch '1' has field(s) 'nme' that the schema in load.json" in done.error
    )
    assert '"ignore_unknown_values": true' in done.error
    assert not spark.catalog.tableExists(kit.table)  # nothing committed, not even the table


def test_ignore_unknown_values_drops_them(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, format="json", schema=SCHEMA, ignore_unknown_values=True)
    done = kit.run(kit.batch("1", lines('{"id": 1, "name": "a"}', '{"id": 2, "nme": "typo"}')))
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "a"), (2, None)]


def test_a_field_named_in_another_case_is_one_spark_would_drop_too(spark: Any, tmp_path: Path) -> None:
    """Spark's JSON reader matches names exactly: `ID` would read as a null `id`."""
    kit = Kit(spark, tmp_path, format="json", schema=SCHEMA)
    done = kit.run(kit.batch("1", lines('{"ID": 1, "Name": "a"}')))
    assert not done.succeeded
    assert done.error is not None and "field(s) 'ID', 'Name' that the schema" in done.error
    assert "case included" in done.error
