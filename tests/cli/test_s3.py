"""The CLI on s3:// URIs against a moto server: put, status, unlock, history and validate go to S3
because the URI says so, and what they print names S3 locations with s3://; a missing region and a
missing bucket are one clear line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import TABLE, Run, World, one_error_line
from turnstile.cli import app
from turnstile.config.settings import Settings
from turnstile.names.paths import Table
from turnstile.state.records import Lock, LockState
from turnstile.store.s3 import S3Store

HEAD = "incremental/2024/05/01/13"
NEXT = "incremental/2024/05/01/14"


@pytest.fixture
def run(aws_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`turnstile ARGS...` in-process, no local stack, S3 at the moto server (AWS_ENDPOINT_URL)."""
    from typer.testing import CliRunner

    del aws_env
    for variable in Settings.variables():
        if not variable.startswith("AWS_"):
            monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("TURNSTILE_HOME", str(tmp_path / "no-stack"))
    runner = CliRunner()
    return lambda *args, input=None: runner.invoke(app, list(args), input=input)


@pytest.fixture
def world(s3_store: S3Store) -> World:
    return World(s3_store, Table(s3_store.bucket, TABLE, "sales", "orders"))  # type: ignore[arg-type]


def s3_uri(world: World, path: str = TABLE) -> str:
    return f"s3://{world.store.bucket}/{path}"


def test_put_uploads_the_batch_to_s3_success_last(run: Run, world: World, tmp_path: Path) -> None:
    batch = tmp_path / "batch"
    batch.mkdir()
    (batch / "part-0.csv").write_text("id\n1\n")
    (batch / "part-1.csv").write_text("id\n2\n")
    result = run("put", str(batch), s3_uri(world, f"{TABLE}/{HEAD}"), "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["batch"] == s3_uri(world, f"{TABLE}/{HEAD}/")
    assert report["success"]["object"] == s3_uri(world, f"{TABLE}/{HEAD}/_SUCCESS")
    listed = {o.name: o.generation for o in world.store.list_objects(f"{TABLE}/{HEAD}/")}
    success = listed.pop(f"{TABLE}/{HEAD}/_SUCCESS")
    assert len(listed) == 2 and all(g < success for g in listed.values())


def test_status_reads_the_s3_bucket(run: Run, world: World) -> None:
    world.queue(HEAD)
    world.queue(NEXT)
    result = run("status", s3_uri(world, ""), "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["storage"].startswith("the S3 endpoint at http://127.0.0.1:")
    [table] = report["tables"]
    assert (table["backlog_depth"], table["backlog_head"]) == (2, HEAD)
    text = run("status", s3_uri(world, "")).stdout
    assert f"s3://{world.store.bucket} on the S3 endpoint at" in text


def test_unlock_releases_a_failed_lock_on_s3(run: Run, world: World) -> None:
    world.queue(HEAD)
    world.fail(HEAD)
    status = run("status", s3_uri(world, ""))
    assert status.exit_code == 1  # BLOCKED
    assert f"fix the cause, then run: turnstile unlock {s3_uri(world)}" in status.stdout
    result = run("unlock", s3_uri(world), "--yes")
    assert result.exit_code == 0, result.output
    found = world.store.read(world.table.lock)
    assert found is not None and Lock.decode(found.data, "lock").state is LockState.FREE
    assert world.store.stat(world.table.backfill) is not None  # the subscriber was restarted


def test_history_lists_the_results_kept_in_s3(run: Run, world: World) -> None:
    world.result(HEAD, 7)
    world.result(NEXT, 8)
    report = json.loads(run("history", s3_uri(world), "-o", "json").stdout)
    assert [(e["rel"], e["generation"]) for e in report["entries"]] == [(HEAD, 7), (NEXT, 8)]


def test_validate_finds_a_bad_load_json_in_s3(run: Run, world: World) -> None:
    world.store.write(f"{TABLE}/_config/load.json", b'{"mode": "append", "max_bad_rows": 3}')
    world.upload(HEAD)
    result = run("validate", s3_uri(world, ""), "-o", "json")
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert any(p["object"].endswith(f"{TABLE}/_config/load.json") for p in problems)


def test_a_missing_region_is_a_usage_error_naming_the_variable(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    result = run("status", s3_uri(world, ""))
    assert result.exit_code == 2
    assert "AWS_REGION is not set" in one_error_line(result)


def test_a_missing_bucket_says_to_check_its_name(run: Run) -> None:
    result = run("status", "s3://no-such-bucket-here")
    assert result.exit_code == 1
    assert "s3://no-such-bucket-here does not exist" in one_error_line(result)


def test_explain_names_the_object_with_its_s3_uri(run: Run, world: World) -> None:
    world.upload(HEAD)
    uri = s3_uri(world, f"{TABLE}/{HEAD}/_SUCCESS")
    report = json.loads(run("explain", uri, "-o", "json").stdout)
    assert (report["object"], report["table"], report["rel"]) == (uri, "sales.orders", HEAD)
    text = run("explain", uri)
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[0].split() == ["object", uri]


def test_backfill_and_explain_name_a_rejected_path_with_its_s3_uri(run: Run, world: World) -> None:
    world.store.write("staging/13/_SUCCESS", b"")  # table name '13' is not allowed
    uri = s3_uri(world, "staging/13/_SUCCESS")
    backfill = run("backfill", s3_uri(world, "staging"))
    assert backfill.exit_code == 1, backfill.output
    assert f"{uri} (generation" in backfill.stdout and f"rejected: {uri}: table name '13'" in backfill.stdout
    [outcome] = json.loads(run("backfill", s3_uri(world, "staging"), "-o", "json").stdout)["objects"]
    assert outcome["error"].startswith(f"{uri}: table name '13' is not allowed")
    explain = run("explain", uri)
    assert explain.exit_code == 2
    assert one_error_line(explain).startswith(f"error: {uri}: table name '13' is not allowed")
    for printed in (backfill.stdout, outcome["error"], explain.stderr):
        assert "gs://" not in printed


def test_history_names_the_table_and_records_with_s3_uris(run: Run, world: World) -> None:
    world.upload(HEAD)  # a batch, not applied yet
    empty = run("history", s3_uri(world))
    assert empty.exit_code == 0, empty.output
    assert f"no result records under {s3_uri(world)}/_turnstile/results/ yet" in empty.stdout
    world.result(HEAD, 7)
    report = json.loads(run("history", s3_uri(world), "-o", "json").stdout)
    assert report["table"] == s3_uri(world)
    [entry] = report["entries"]
    assert entry["object"] == s3_uri(world, f"{TABLE}/_turnstile/results/{HEAD}/7.json")


def test_no_command_spells_an_s3_location_gs(run: Run, world: World) -> None:
    world.queue(HEAD)
    world.fail(HEAD)
    world.result(NEXT, 8)
    world.store.write(f"{TABLE}/_config/load.json", b'{"mode": "append", "max_bad_rows": 3}')
    world.upload(NEXT)
    world.store.write("staging/13/_SUCCESS", b"")
    commands = [
        ("status", s3_uri(world, "")),
        ("status", s3_uri(world), "-o", "json"),
        ("history", s3_uri(world)),
        ("explain", s3_uri(world, f"{TABLE}/{HEAD}/part-0.csv")),
        ("validate", s3_uri(world, "")),
        ("validate", s3_uri(world, ""), "-o", "json"),
        ("pause", s3_uri(world)),
        ("resume", s3_uri(world)),
        ("unlock", s3_uri(world), "--yes"),
        ("explain", s3_uri(world, "")),  # a bucket, not an object: the hint
        ("history", s3_uri(world, "sales")),  # not a table: the hint
        ("retry", s3_uri(world, "")),
        ("explain", s3_uri(world, "staging/13/_SUCCESS")),  # a rejected path
        ("backfill", s3_uri(world, "staging")),
    ]
    for command in commands:
        result = run(*command)
        printed = result.stdout + result.stderr
        assert "gs://" not in printed, (command, printed)
