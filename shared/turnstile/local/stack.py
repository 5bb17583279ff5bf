"""The embedded local stack: turnstile on one machine, no cloud account.

- fake-gcs-server, its data persisted under `<home>/gcs/`;
- a function host: functions/main.py under functions-framework, `on_object_finalized`;
- a second one for the HTTP `sweep` function, called on a timer as Cloud Scheduler would;
- the event bridge (`local.bridge`): every finalized object becomes a CloudEvent to the host;
- jobs: the local runner (spark-submit) with a Hadoop Iceberg catalog in `<home>/warehouse/`.
`<home>/stack.json` records the endpoints for every other command.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import requests

from turnstile.config.settings import Settings, child_environment
from turnstile.core import logs
from turnstile.jobs.local import stop_drivers
from turnstile.jobs.local_spark import ensure_jars
from turnstile.local import emulator
from turnstile.local.bridge import EventBridge, wait_until
from turnstile.local.stackinfo import STACK_FILE, StackInfo
from turnstile.names.placement import STATE_MARKER
from turnstile.store.gcs import GcsStore, make_client

log = logs.get("stack")
CATALOG = "turnstile"


def functions_source() -> Path:
    """functions/main.py of this checkout (the stack runs the deployable entrypoints as they are)."""
    source = Path(__file__).resolve().parents[3] / "functions" / "main.py"
    if not source.is_file():
        raise FileNotFoundError(f"{source} not found: run turnstile from a checkout of the repository")
    return source


@dataclass
class StackOptions:
    home: Path
    bucket: str = "turnstile-local"
    sweep_every: float = 60.0
    environment: dict[str, str] = field(default_factory=dict)  # extra settings for the functions


class Stack:
    """Start with `start()`, stop with `stop()`; `info` says where everything is."""

    def __init__(self, options: StackOptions) -> None:
        self.options = options
        self.home = options.home.resolve()
        self._processes: list[subprocess.Popen[bytes]] = []
        self._server: emulator.Emulator | None = None
        self.bridge: EventBridge | None = None
        self.info: StackInfo | None = None
        self._stop = threading.Event()

    def environment(self, storage_url: str) -> dict[str, str]:
        """The functions' environment: the same variables a deployment sets, pointed at this stack."""
        return {
            "STORAGE_EMULATOR_HOST": storage_url,
            "GOOGLE_CLOUD_PROJECT": "local",
            "JOB_RUNNER": "local",
            "TURNSTILE_HOME": str(self.home),
            "ICEBERG_CATALOG": CATALOG,
            "ICEBERG_WAREHOUSE": str(self.home / "warehouse"),
            "LOG_LEVEL": "INFO",
        } | self.options.environment

    def start(self) -> StackInfo:
        self.home.mkdir(parents=True, exist_ok=True)
        (self.home / "logs").mkdir(exist_ok=True)
        ensure_jars(self.home / "jars")  # the first job would build them otherwise
        self._server = emulator.start(self.home, backend="filesystem")
        self._server.create_bucket(self.options.bucket)
        env = self.environment(self._server.url)
        store = GcsStore(make_client("local", self._server.url), self.options.bucket)
        state = env.get("STATE_BUCKET")
        if state:  # turnstile's own objects there, unwatched: the bridge delivers the bucket's only
            self._server.create_bucket(state)
            store.write(STATE_MARKER, state.encode())
        events = self._host("on_object_finalized", "cloudevent", env)
        sweeper = self._host("sweep", "http", env)
        self.bridge = EventBridge(store, events, self.home / "bridge-seen.json")
        self.bridge.start()
        threading.Thread(target=self._sweep_loop, args=(sweeper,), name="sweeper", daemon=True).start()
        self.info = StackInfo(
            home=str(self.home),
            storage_url=self._server.url,
            function_url=events,
            bucket=self.options.bucket,
            warehouse=str(self.home / "warehouse"),
            catalog=CATALOG,
            pid=os.getpid(),
        )
        self.info.save()
        return self.info

    def _host(self, target: str, signature: str, env: dict[str, str]) -> str:
        port = emulator.free_port()
        command = [
            sys.executable,
            "-m",
            "functions_framework",
            "--target",
            target,
            "--source",
            str(functions_source()),
            "--signature-type",
            signature,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        with (self.home / "logs" / f"function-{target}.log").open("ab") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_environment(env),
                start_new_session=True,
            )
        self._processes.append(process)
        url = f"http://127.0.0.1:{port}/"
        if (
            not wait_until(lambda: _answers(url) or process.poll() is not None, 30)
            or process.poll() is not None
        ):
            raise RuntimeError(f"the {target} function host did not start; see {self.home / 'logs'}")
        return url

    def _sweep_loop(self, url: str) -> None:
        while not self._stop.wait(self.options.sweep_every):
            try:
                requests.post(url, json={"buckets": [self.options.bucket]}, timeout=120)
            except requests.RequestException as exc:
                log.warning(f"sweep call failed: {exc}")

    def stop(self) -> None:
        self._stop.set()
        if self.bridge:
            self.bridge.stop()
        for process in self._processes:
            process.terminate()
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
        stop_drivers(self.home)  # the warm Spark drivers the functions' jobs started
        if self._server:
            self._server.stop()
        (self.home / STACK_FILE).unlink(missing_ok=True)

    def settled(self, quiet_for: float = 3.0) -> bool:
        """No event in flight, and none for `quiet_for` seconds of polling (jobs may still run)."""
        if self.bridge is None:
            return True
        before = self.bridge.delivered
        time.sleep(quiet_for)
        return self.bridge.idle() and self.bridge.delivered == before


def _answers(url: str) -> bool:
    try:
        requests.get(url, timeout=1)
    except requests.RequestException:
        return False
    return True


def settings_for(info: StackInfo) -> Settings:
    """Settings that talk to a running stack (for the CLI and the demo)."""
    return Settings.from_env(
        {
            "STORAGE_EMULATOR_HOST": info.storage_url,
            "TURNSTILE_HOME": info.home,
            "ICEBERG_CATALOG": info.catalog,
            "ICEBERG_WAREHOUSE": info.warehouse,
            "GOOGLE_CLOUD_PROJECT": "local",
        }
    )
