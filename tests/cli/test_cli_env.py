"""Where the CLI talks to (the local stack's file, or the environment), errors, and `query`'s
refusals (its Spark path is tested with the local stack)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.conftest import Run, World, one_error_line
from turnstile.cli import app, resolve_settings
from turnstile.core.errors import SettingsError
from turnstile.local.stackinfo import StackInfo


def test_the_stack_file_fills_in_the_emulator_warehouse_and_catalog(stack: StackInfo) -> None:
    target = resolve_settings()
    assert target.stack == stack
    assert target.settings.storage_emulator_host == stack.storage_url
    assert target.settings.iceberg_warehouse == stack.warehouse
    assert target.settings.iceberg_catalog == stack.catalog
    assert target.storage == f"the local stack at {stack.storage_url}"


def test_an_explicit_emulator_wins_over_the_stack(stack: StackInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    target = resolve_settings()
    assert target.settings.storage_emulator_host == "http://127.0.0.1:9"
    assert target.settings.iceberg_warehouse is None
    assert target.storage == "the emulator at http://127.0.0.1:9"
    del stack


def test_without_a_stack_it_is_gcs(tmp_path: Path) -> None:
    target = resolve_settings({"TURNSTILE_HOME": str(tmp_path)})
    assert target.stack is None
    assert target.settings.storage_emulator_host is None
    assert target.storage == "Google Cloud Storage"


def test_a_broken_stack_file_is_a_settings_error(tmp_path: Path) -> None:
    (tmp_path / "stack.json").write_text('{"home": "x"}')
    with pytest.raises(SettingsError, match="is not a stack file"):
        resolve_settings({"TURNSTILE_HOME": str(tmp_path)})


def test_explain_goes_through_the_stack(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    result = run("explain", f"{world.uri}/incremental/2024/05/01/13/_SUCCESS", "-o", "json")
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    assert (described["kind"], described["ordered"]) == ("success", True)


def test_bad_settings_are_one_line_and_exit_2(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUNCTION_TIMEOUT_SEC", "soon")
    result = run("status")
    assert result.exit_code == 2
    assert "FUNCTION_TIMEOUT_SEC" in one_error_line(result)


def test_query_without_a_stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TURNSTILE_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["query", "SELECT 1"])
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"no local stack at {tmp_path / 'stack.json'}" in line
    assert "turnstile up" in line


def test_query_without_a_warehouse(run: Run, stack: StackInfo) -> None:
    result = run("query", "SELECT * FROM sales.orders", "-o", "json")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"the local warehouse {stack.warehouse} does not exist yet" in line
    assert result.stdout == ""


def test_the_cli_does_not_import_pyspark() -> None:
    code = "import sys, turnstile.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_a_reader_that_stops_reading_is_no_error() -> None:
    """`turnstile status | head`: the pipe closes under the command; it ends quietly."""
    code = (
        "import typer\n"
        "from turnstile.cli._errors import guarded\n"
        "app = typer.Typer()\n"
        "@app.command()\n"
        "@guarded\n"
        "def command() -> None:\n"
        "    print('the first line the reader took')\n"
        "    raise BrokenPipeError(32, 'Broken pipe')\n"
        "app()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
