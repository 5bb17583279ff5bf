"""Where the local runner's programs are, and what a failed local job's log says, found without
importing Spark (importing pyspark is slow; the runner runs in the function host)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from turnstile.core.errors import SettingsError

WARM_DRIVER_MODULE = "turnstile.spark.warm"
SPOOL_DRIVER_MODULE = "turnstile.entrypoints.spool_driver"
JOB_MAIN_MODULE = "turnstile.spark.main"


def _module_file(module: str) -> Path:
    """Where a module's source is, found without importing it (the job's imports are Spark's)."""
    spec = find_spec(module)
    if spec is None or spec.origin is None:
        raise SettingsError(f"Python module {module} is not installed; pip install -r requirements.txt")
    return Path(spec.origin)


def spark_submit() -> Path:
    return _module_file("pyspark").parent / "bin" / "spark-submit"


def warm_driver_file() -> Path:
    return _module_file(WARM_DRIVER_MODULE)


def spool_driver_file() -> Path:
    """The warm driver of the bucket's spool: the main file Dataproc runs as a driver batch."""
    return _module_file(SPOOL_DRIVER_MODULE)


def job_main_file() -> Path:
    """The job's main file, as Dataproc Serverless runs it: one Spark application per job."""
    return _module_file(JOB_MAIN_MODULE)


def failure_detail(log: Path, code: int) -> str:
    """The job's own `turnstile job failed:` line, else the log's last lines."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        lines = []
    reported = [line for line in lines if line.startswith("turnstile job failed:")]
    if reported:
        return reported[-1].removeprefix("turnstile job failed:").strip()
    tail = [line for line in lines if line.strip()][-3:]
    return f"the job exited {code}: " + " | ".join(tail)
