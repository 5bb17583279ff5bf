"""A cold local job: the local runner's `LOCAL_DRIVER=cold` mode.

    python -m turnstile.jobs.local_cold JOB_FOLDER -- spark-submit [--conf ...] main.py --manifest URI ...

The job gets a Spark application of its own (a JVM, pyspark, a session and the Iceberg catalog,
started for it and stopped after it), as every Dataproc Serverless batch does. This process stands
where the warm driver stands for a warm job: it records `started.json`, runs the command with its
output appended to the job's log, and records `finished.json` with the exit code, so the runner
reads a cold job's state exactly as it reads a warm one's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from turnstile.state.spool import write_json

STARTED = "started.json"
FINISHED = "finished.json"
LOG = "job.log"


def run(folder: Path, command: list[str]) -> int:
    write_json(folder / STARTED, {"pid": os.getpid(), "started_at": _now()})
    with (folder / LOG).open("ab") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    write_json(folder / FINISHED, {"exit_code": code, "finished_at": _now()})
    return code


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m turnstile.jobs.local_cold JOB_FOLDER -- COMMAND...", file=sys.stderr)
        return 2
    return run(Path(argv[0]), argv[2:])


def _now() -> str:
    return datetime.now(UTC).isoformat()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
