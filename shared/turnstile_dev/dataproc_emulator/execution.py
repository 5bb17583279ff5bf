"""Running a batch for real: its files staged into a working folder of its own, then the local
pyspark's spark-submit with the batch's Spark properties and arguments, in a process group of its own
(a cancel ends all of it). The exit code decides SUCCEEDED or FAILED (with the end of the driver's
output as the state message)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from google.cloud import dataproc_v1

from turnstile.jobs import local_spark, local_worker
from turnstile_dev.dataproc_emulator.batches import BatchBook, State
from turnstile_dev.dataproc_emulator.staging import Staged, StageError, Storage, stage

DRIVER_ENV = "spark.dataproc.driverEnv."
"""Spark properties that set an environment variable of the driver (Dataproc Serverless's own)."""

PASSED_ENVIRONMENT = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "JAVA_HOME")
"""What a batch keeps of the emulator's environment: nothing of its Python path or settings."""

TURNSTILE_ARGS = ("--stage-to", "{workdir}/staged")
"""turnstile's job on this machine: Spark here cannot read gs://, so the job copies each batch's
files through the storage client first (its local seam, turnstile.spark.staging)."""

OUTPUT = "driveroutput.log"
TAIL_LINES = 5
TAIL_CHARACTERS = 2000


def runtime_properties(python: str) -> dict[str, str]:
    """The emulated runtime's own Spark defaults (a batch's properties override them): local Spark
    on two cores, loopback only, no UI, quiet logs, and the runtime's Python for the driver and the
    workers."""
    return {
        "spark.master": "local[2]",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.extraJavaOptions": (
            "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
            f"-Dlog4j2.configurationFile={local_spark.LOGGING.as_uri()}"
        ),
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
    }


@dataclass(frozen=True)
class Runtime:
    """What stands for the Dataproc runtime image on this machine."""

    root: Path
    """Each batch runs in `root/<batch id>/`, its driver output in `driveroutput.log` there."""
    storage: Storage
    """The storage client `gs://` URIs are read with (fake-gcs-server's)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment of every batch (STORAGE_EMULATOR_HOST: the batch's `gs://`)."""
    python: str = sys.executable
    extra_args: tuple[str, ...] = ()
    """Appended after each batch's own arguments, `{workdir}` replaced by its working folder: what a
    job needs to run here and not on Dataproc (turnstile's job: `--stage-to {workdir}/staged`)."""
    cancel_grace: float = 10.0
    """Seconds between SIGTERM and SIGKILL of a cancelled batch's process group."""


def command(batch: dataproc_v1.Batch, staged: Staged, runtime: Runtime, workdir: Path) -> list[str]:
    """The spark-submit command line of `batch` (its files already staged)."""
    spec = batch.pyspark_batch
    properties = runtime_properties(runtime.python) | {
        key: value for key, value in batch.runtime_config.properties.items() if key.startswith("spark.")
    }
    argv = [str(local_worker.spark_submit())]
    for key, value in sorted(properties.items()):
        argv += ["--conf", f"{key}={value}"]
    if staged.jars:
        argv += ["--jars", ",".join(str(p) for p in staged.jars)]
    if staged.python_files:
        argv += ["--py-files", ",".join(str(p) for p in staged.python_files)]
    if staged.files:
        argv += ["--files", ",".join(str(p) for p in staged.files)]
    if staged.archives:
        argv += ["--archives", ",".join(f"{path}#{alias}" for path, alias in staged.archives)]
    extra = [arg.replace("{workdir}", str(workdir)) for arg in runtime.extra_args]
    return [*argv, str(staged.main), *spec.args, *extra]


def environment(batch: dataproc_v1.Batch, runtime: Runtime) -> dict[str, str]:
    """The driver's environment: a few of this machine's variables, the runtime's, and the batch's
    `spark.dataproc.driverEnv.*` properties."""
    env = {key: os.environ[key] for key in PASSED_ENVIRONMENT if key in os.environ}
    env |= {
        "SPARK_HOME": str(local_worker.spark_submit().parents[1]),
        "PYSPARK_PYTHON": runtime.python,
        "PYSPARK_DRIVER_PYTHON": runtime.python,
    }
    env |= runtime.environment
    for key, value in batch.runtime_config.properties.items():
        if key.startswith(DRIVER_ENV):
            env[key.removeprefix(DRIVER_ENV)] = value
    return env


def failure_message(output: Path, code: int) -> str:
    """As Dataproc words a failed batch: the end of the driver's output, and where the rest is."""
    try:
        lines = [line.strip() for line in output.read_text(errors="replace").splitlines() if line.strip()]
    except FileNotFoundError:
        lines = []
    tail = " | ".join(lines[-TAIL_LINES:])[-TAIL_CHARACTERS:] or "no output"
    return (
        f"Job failed with message [exit code {code}: {tail}]. "
        f"Additional details can be found at: {output.as_uri()}"
    )


class Executor:
    """Runs each batch the book creates on a thread of its own."""

    def __init__(self, book: BatchBook, runtime: Runtime) -> None:
        self._book = book
        self._runtime = runtime
        self._processes: dict[str, subprocess.Popen[bytes]] = {}
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self, batch: dataproc_v1.Batch) -> None:
        thread = threading.Thread(target=self._run, args=(batch,), name=f"batch-{batch.uuid}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def workdir(self, name: str) -> Path:
        return self._runtime.root / name.rsplit("/", 1)[-1]

    def cancel(self, name: str) -> None:
        """End the batch's process group (its thread then records CANCELLED); a batch not started yet
        is CANCELLED by its thread before it starts."""
        with self._lock:
            process = self._processes.get(name)
        if process is None:
            return
        _signal(process, signal.SIGTERM)
        timer = threading.Timer(self._runtime.cancel_grace, _signal, (process, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def stop(self) -> None:
        """Kill every running batch and wait for their threads."""
        with self._lock:
            running = list(self._processes.values())
        for process in running:
            _signal(process, signal.SIGKILL)
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self, batch: dataproc_v1.Batch) -> None:
        name = batch.name
        workdir = self.workdir(name)
        try:
            if workdir.exists():
                shutil.rmtree(workdir)
            workdir.mkdir(parents=True)
            staged = stage(batch.pyspark_batch, workdir, self._runtime.storage)
        except (StageError, OSError) as exc:
            self._book.move(name, State.FAILED, f"Batch {name} could not start: {exc}")
            return
        output = workdir / OUTPUT
        with self._lock:
            if self._book.cancel_requested(name):
                self._book.move(name, State.CANCELLED, "Batch cancelled before it started")
                return
            with output.open("wb") as log:
                process = subprocess.Popen(
                    command(batch, staged, self._runtime, workdir),
                    cwd=workdir,
                    env=environment(batch, self._runtime),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self._processes[name] = process
        self._book.move(name, State.RUNNING, "", output_uri=output.as_uri())
        code = process.wait()
        with self._lock:
            del self._processes[name]
        if self._book.cancel_requested(name):
            self._book.move(name, State.CANCELLED, "Batch cancelled")
        elif code == 0:
            self._book.move(name, State.SUCCEEDED)
        else:
            self._book.move(name, State.FAILED, failure_message(output, code))


def _signal(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        pass
