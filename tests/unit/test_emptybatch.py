"""`turnstile.spark.emptybatch`: a batch whose files hold no columns is applied as no rows."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile.spark.emptybatch import as_no_rows, no_table_from
from turnstile.state.records import ManifestBatch


def batch(**load: Any) -> ManifestBatch:
    return ManifestBatch(
        dataset="ds",
        table="tbl",
        table_prefix="ds/tbl",
        rel="2024/05/01/13",
        success_generation=1,
        data_uris=("gs://b/ds/tbl/2024/05/01/13/part-0.csv",),
        load=load,
        transform_sql="SELECT id FROM batch",
        transform_source="gs://b/ds/tbl/_config/transform.sql",
        config_digest="abc",
        result="ds/tbl/_turnstile/results/2024/05/01/13/1.json",
        failed_prefix="ds/tbl/_failed/2024/05/01/13/",
    )


@pytest.mark.parametrize(
    ("mode", "extra", "applied_as"),
    [
        ("append", {}, "append"),
        ("overwrite", {}, "overwrite"),  # the batch's no rows replace the table's
        ("overwrite_partitions", {}, "append"),  # no partition to replace
        ("merge", {"merge_keys": ["id"], "delete_column": "gone", "merge_order_by": "ts"}, "append"),
    ],
)
def test_no_rows_change_nothing_but_an_overwrite_and_run_no_mapping_or_transform(
    mode: str, extra: dict[str, Any], applied_as: str
) -> None:
    given = batch(mode=mode, mapping=[{"remove": "x"}], time_column="ts", **extra)
    applied = as_no_rows(given)
    assert applied.load.mode == applied_as
    assert applied.load.mapping == ()
    assert applied.transform_sql is None and applied.transform_source is None
    assert applied.load.delete_column is None and applied.load.merge_keys == ()
    assert applied.load.time_column == "ts"  # still checked against the table's columns
    assert (applied.rel, applied.success_generation, applied.result) == (given.rel, 1, given.result)
    assert given.load.mode == mode  # the batch itself is left as it is


def test_the_failure_names_the_folder_the_table_and_what_to_do() -> None:
    message = no_table_from("local.ds.tbl", "gs://b/ds/tbl/2024/05/01/13/")
    assert message.startswith("its files in gs://b/ds/tbl/2024/05/01/13/ hold no columns (they are empty)")
    assert "nothing to create local.ds.tbl from" in message
    assert "upload the batch's data" in message
    assert '"schema"' in message and '"table_schema"' in message
