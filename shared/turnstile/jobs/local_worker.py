"""Runs one local job: spark-submit of the job's main file, then records how it ended.

`python -m turnstile.jobs.local_worker <job folder>`, started detached by `LocalRunner.submit`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

from turnstile.errors import SettingsError
from turnstile.jobs.local import LOG, REQUEST, STATE, _now, read_json, write_json
from turnstile.jobs.port import JobState

JOB_MAIN_MODULE = "turnstile.spark.main"
JOB_MAIN_MODULE_AWS = "turnstile.spark.main_aws"  # for a manifest on S3


def _module_file(module: str) -> Path:
    """Where a module's source is, found without importing it (the job's imports are Spark's)."""
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise SettingsError(f"Python module {module} is not installed; pip install -r requirements.txt")
    return Path(spec.origin)


def spark_submit() -> Path:
    return _module_file("pyspark").parent / "bin" / "spark-submit"


def run(folder: Path) -> int:
    request = read_json(folder / REQUEST)
    if request is None:
        write_json(folder / STATE, {"state": JobState.FAILED.value, "detail": f"no {REQUEST} in {folder}"})
        return 1
    base = {"submitted_at": (read_json(folder / STATE) or {}).get("submitted_at"), "pid": os.getpid()}
    write_json(folder / STATE, base | {"state": JobState.RUNNING.value, "started_at": _now()})
    main_module = JOB_MAIN_MODULE_AWS if request["manifest"].startswith("s3://") else JOB_MAIN_MODULE
    command = [str(spark_submit())]
    for key, value in request["conf"].items():
        command += ["--conf", f"{key}={value}"]
    command += [
        str(_module_file(main_module)),
        "--manifest",
        request["manifest"],
        "--stage-to",
        str(folder / "staged"),
    ]
    with (folder / LOG).open("ab") as log:
        code = subprocess.call(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    detail = None if code == 0 else _failure(folder / LOG, code)
    state = JobState.SUCCEEDED if code == 0 else JobState.FAILED
    write_json(
        folder / STATE,
        base | {"state": state.value, "finished_at": _now(), "exit_code": code, "detail": detail},
    )
    return code


def _failure(log: Path, code: int) -> str:
    lines = log.read_text(errors="replace").splitlines()
    reported = [line for line in lines if line.startswith("turnstile job failed:")]
    if reported:
        return reported[-1].removeprefix("turnstile job failed:").strip()
    tail = [line for line in lines if line.strip()][-3:]
    return f"spark-submit exited {code}: " + " | ".join(tail)


if __name__ == "__main__":
    sys.exit(run(Path(sys.argv[1])))
