"""`turnstile query` in a process of its own, as an operator runs it: its rows on stdout, and on
stderr nothing but its own one-line error (no Spark start-up warnings around it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from turnstile.local.stackinfo import StackInfo

pytestmark = pytest.mark.spark


def query(home: Path, sql: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "STORAGE_EMULATOR_HOST"} | {
        "TURNSTILE_HOME": str(home)
    }
    return subprocess.run(
        [sys.executable, "-m", "turnstile.cli", "query", sql],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_rows_on_stdout_and_one_error_line_on_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "warehouse").mkdir(parents=True)
    StackInfo(
        home=str(home),
        storage_url="http://127.0.0.1:1",
        function_url="http://127.0.0.1:1",
        bucket="b",
        warehouse=str(home / "warehouse"),
        catalog="turnstile",
        pid=0,
    ).save()
    good = query(home, "SELECT 41 + 1 AS answer")
    assert good.returncode == 0, good.stderr
    assert "answer" in good.stdout and "42" in good.stdout
    assert good.stderr == ""
    bad = query(home, "SELECT * FROM turnstile.sales.nope")
    assert bad.returncode == 1
    [line] = bad.stderr.splitlines()
    assert line.startswith("error: Spark rejected the query: ")
