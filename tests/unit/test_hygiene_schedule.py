"""When the job expires snapshots: once a table holds a tenth more than it keeps (at least 10)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from turnstile.config.load_config import LoadConfig
from turnstile.spark.hygiene import due


@pytest.mark.parametrize(
    ("snapshots", "keep", "expected"),
    [(1009, 1000, False), (1100, 1000, True), (11, 1, True), (10, 1, False), (110, 100, True)],
)
def test_expiry_is_due_a_tenth_past_what_it_keeps(snapshots: int, keep: int, expected: bool) -> None:
    assert due(snapshots, keep) is expected


def test_retention_defaults_and_bounds() -> None:
    load = LoadConfig()
    assert (load.snapshot_retention_days, load.snapshot_retention_min) == (7, 1000)
    assert LoadConfig.model_validate({"snapshot_retention_days": None}).snapshot_retention_days is None
    with pytest.raises(ValueError, match="snapshot_retention_min"):
        LoadConfig.model_validate({"snapshot_retention_min": 0})
