"""The bench's rebuild step on a tiny workload in the test session's Spark: each hour's derived step
built, its source hour changed, the step rebuilt; both timed, and the table left equal to its
transform over the final source."""

from __future__ import annotations

from typing import Any

import pytest

from turnstile_dev.bench import rebuild_cost

pytestmark = [pytest.mark.spark]


def test_rebuild_step_times_both_and_leaves_the_table_equal_to_its_transform(spark: Any) -> None:
    out = rebuild_cost.in_spark(spark, {"catalog": "local", "steps": 2, "rows": 40})

    cost = out["rebuild_cost"]
    assert cost["steps"] == 2 == len(cost["build_seconds"]) == len(cost["rebuild_seconds"])
    assert all(s > 0 for s in cost["build_seconds"] + cost["rebuild_seconds"])
    assert cost["ratio"] == cost["rebuild_median_seconds"] / cost["build_median_seconds"]
    assert cost["equal_to_transform_over_final_source"] is True
    # One commit per build and per rebuild (hour 0 included): the rebuild's delete and append together.
    snapshots = spark.sql(f"SELECT operation FROM local.{rebuild_cost.DERIVED}.t0.snapshots").collect()
    assert len(snapshots) == 6
    section = rebuild_cost.markdown(out)
    assert f"**{cost['ratio']:.2f}x**" in section and "is equal to its transform" in section
