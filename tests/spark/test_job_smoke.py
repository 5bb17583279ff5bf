from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.spark.jobkit import Kit, csv
from turnstile.state.records import BatchOutcome

pytestmark = pytest.mark.spark


def test_append_commits_each_batch_once_and_a_rerun_skips(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path)
    b1 = kit.batch("2024/05/01/13", csv("id,v", "1,a", "2,b"))
    b2 = kit.batch("2024/05/01/14", csv("id,v", "3,c"))
    done = kit.run(b1, b2)
    assert done.succeeded and list(done.outcomes.values()) == [BatchOutcome.COMMITTED] * 2
    assert kit.rows() == [(1, "a"), (2, "b"), (3, "c")]
    again = kit.run(b1, b2, job_id="job-2")
    assert list(again.outcomes.values()) == [BatchOutcome.SKIPPED] * 2
    assert kit.rows() == [(1, "a"), (2, "b"), (3, "c")]
    tags = [s.get("turnstile.batch") for s in kit.snapshots()]
    assert tags == [f"2024/05/01/13#{b1.success_generation}", f"2024/05/01/14#{b2.success_generation}"]


def test_merge_resolves_duplicate_keys_and_deletes(spark: Any, tmp_path: Path) -> None:
    kit = Kit(
        spark,
        tmp_path,
        mode="merge",
        merge_keys=["id"],
        merge_order_by="ts",
        delete_column="gone",
        schema="id INT, v STRING, ts INT, gone BOOLEAN",
    )
    b1 = kit.batch("1", csv("id,v,ts,gone", "1,a,1,false", "1,b,2,false", "2,x,1,false"))
    b2 = kit.batch("2", csv("id,v,ts,gone", "2,x,3,true", "3,c,1,false"))
    done = kit.run(b1, b2)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "b", 2), (3, "c", 1)]


def test_ordered_dml_transform_builds_abcd(spark: Any, tmp_path: Path) -> None:
    kit = Kit(spark, tmp_path, table_schema="id INT, s STRING")
    kit.transform = (
        "MERGE INTO ${table} t USING batch b ON t.id = b.id "
        "WHEN MATCHED THEN UPDATE SET t.s = concat(t.s, b.c) "
        "WHEN NOT MATCHED THEN INSERT (id, s) VALUES (b.id, b.c)"
    )
    batches = [kit.batch(str(i), csv("id,c", f"1,{letter}")) for i, letter in enumerate("ABCD")]
    done = kit.run(*batches)
    assert done.succeeded, done.error
    assert kit.rows() == [(1, "ABCD")]
    assert len([s for s in kit.snapshots() if "turnstile.batch" in s]) == 4
