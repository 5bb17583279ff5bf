"""The result record of a batch or step the job committed."""

from __future__ import annotations

import time

from turnstile.state.records import BatchOutcome, BatchResult, ExpectationCount, ManifestBatch


def committed(
    batch: ManifestBatch,
    job_id: str,
    started: float,
    snapshot: int,
    time_range: tuple[str | None, str | None],
    *,
    rows_read: int,
    rows_written: int,
    bad_rows: int = 0,
    bytes_read: int = 0,
    expectations: tuple[ExpectationCount, ...] = (),
) -> BatchResult:
    """The result of a batch or step committed as `snapshot`, timed from `started` (monotonic)."""
    return BatchResult(
        job_id=job_id,
        rel=batch.rel,
        success_generation=batch.success_generation,
        outcome=BatchOutcome.COMMITTED,
        seconds=round(time.monotonic() - started, 3),
        snapshot_id=snapshot,
        time_min=time_range[0],
        time_max=time_range[1],
        rows_read=rows_read,
        rows_written=rows_written,
        bad_rows=bad_rows,
        bytes_read=bytes_read,
        expectations=expectations,
    )
