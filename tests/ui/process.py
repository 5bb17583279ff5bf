"""`turnstile ui` as an operator runs it: a process of its own, whose URL is read from its output."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from turnstile.config.settings import child_environment

URL = re.compile(r"the turnstile console is at (http://127\.0\.0\.1:\d+/\?token=\S+)")


class ConsoleProcess:
    def __init__(self, args: list[str], environment: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "turnstile.cli", "ui", "--port", "0", *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=child_environment(environment),
            start_new_session=True,
        )
        self.url = self._wait_for_url()
        self.base = self.url.split("/?", 1)[0]
        self.token = self.url.rpartition("token=")[2]

    def _wait_for_url(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = URL.search(self.output())
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"turnstile ui did not print its URL:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        """Ctrl-C, as the operator stops it; its exit code."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._out.close()
        return self.process.returncode


def read_through(browser: requests.Session, base: str, page: str, timeout: float = 30) -> str:
    """The tables page once the console's first reading is done: a page served while it is under
    way (it says "reading tables", `data-reading`) is fetched again as the page itself does."""
    deadline = time.monotonic() + timeout
    while "data-reading" in page:
        assert time.monotonic() < deadline, page
        time.sleep(0.2)
        answer = browser.get(f"{base}/fragment/tables", timeout=timeout)
        assert answer.status_code == 200, answer.text
        page = answer.text
    return page
