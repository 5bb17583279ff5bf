"""The warm driver's main file (`turnstile.entrypoints.spool_driver`) with a stand-in for the
job: its own arguments, Spark session, spool store and serving loop, but each request's job sleeps
the seconds its manifest URI's fragment says (`...manifest.json#sleep=5`), so that the Dataproc
emulator's contract tests control how long a job runs without building Iceberg tables."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from turnstile.entrypoints import spool_driver


def stand_in(
    spark: Any, request: Any, stage_root: Path | None, logs: Path, stop_requested: Any = None, **_: Any
) -> tuple[Any, str | None]:
    from turnstile.state.spoolrecords import Outcome

    print(f"stand-in job {request.job_id} ({request.table})", flush=True)
    _, _, fragment = str(request.body["manifest"]).partition("#sleep=")
    time.sleep(float(fragment or 0))
    return Outcome.SUCCEEDED, None


if __name__ == "__main__":
    spool_driver.run_request = stand_in  # type: ignore[assignment]
    sys.exit(spool_driver.main())
