"""A derived table's step written in `replace_window` mode: the rows of its window on the table's
`time_column` deleted and the step's rows added, in one Iceberg commit (DataFrameWriterV2's
`overwrite(condition)`, Iceberg's overwrite by row filter).

Iceberg carries out that delete by dropping whole data files, so it needs every file to lie wholly
inside or outside the window: the table is partitioned on the step (`partition_by: ["hours(ts)"]`,
checked when load.json is read). A table whose files straddle the window (created with another
partition spec) makes Iceberg refuse the commit; the step fails with that reason and nothing written.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as f

from turnstile.config.load_config import LoadConfig
from turnstile.core.errors import BatchFailed
from turnstile.spark import messages, steps
from turnstile.state.records import ManifestBatch

STRADDLES = "Cannot delete file where some, but not all, rows match filter"  # Iceberg's refusal


def condition(batch: ManifestBatch, load: LoadConfig) -> Column:
    """`time_column >= window_start AND time_column < window_end`."""
    if batch.window_start is None or batch.window_end is None or not load.time_column:
        raise BatchFailed(
            f"mode replace_window needs a derived table's step and a time_column; {batch.rel!r} of "
            f"{batch.table_prefix} has {'no time_column' if batch.window_start else 'no window'}"
        )
    column = f.col(f"`{load.time_column}`")
    return (column >= f.lit(batch.window_start)) & (column < f.lit(batch.window_end))


def replace(target: str, frame: DataFrame, batch: ManifestBatch, load: LoadConfig) -> None:
    """Replace the window's rows by the step's, in one commit; BatchFailed (nothing written) when a
    row of the step lies outside its window (a later rebuild would not replace it) or Iceberg
    cannot delete the window by whole files."""
    inside = condition(batch, load)
    if not frame.filter(~inside | inside.isNull()).isEmpty():
        raise BatchFailed(
            f"{steps.describe(batch)} of {batch.table_prefix}: transform.sql returned rows whose "
            f"{load.time_column} is outside the window (or null), which mode replace_window would never "
            "replace; filter them with ${window_start} <= time < ${window_end}; nothing was written"
        )
    try:
        frame.writeTo(target).overwrite(inside)
    except Exception as exc:
        if STRADDLES not in str(exc):
            raise
        raise BatchFailed(
            f"{steps.describe(batch)} of {batch.table_prefix}: Iceberg cannot replace the window of "
            f"{target} by whole files ({messages.reason(exc)}): the table's partition spec must "
            f"split rows at the step, e.g. ALTER TABLE {target} ADD PARTITION FIELD "
            f"hours({load.time_column}); nothing was written"
        ) from exc
