"""`turnstile status`: per-table health from the state objects, as text and as JSON."""

from __future__ import annotations

import json
import shlex
import threading
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import TABLE, Run, World, one_error_line
from tests.contract.test_gcs_transient import FlakyStorage
from turnstile.local.stackinfo import StackInfo
from turnstile.names.paths import Table, claim_name
from turnstile.ops import status as status_ops
from turnstile.state.records import CancelChoice, Claim, ClaimState, OpenJob

HOURS = [f"incremental/2024/05/01/{h:02d}" for h in range(13, 16)]


def blocked(world: World) -> dict[str, int]:
    """sales.orders: 12 applied, 13 failed, 14 and 15 queued behind it; web.clicks: unordered, idle."""
    world.store.write("sales/orders/_config/ORDERME", b"")
    generations = {rel: world.queue(rel) for rel in HOURS}
    world.result("incremental/2024/05/01/12", 7)
    world.fail(HOURS[0], position="incremental/2024/05/01/12")
    world.store.write("web/clicks/$20240501/part-0.csv", b"id\n1\n")
    world.store.write("web/clicks/$20240501/_SUCCESS", b"")
    return generations


def table_json(run: Run, name: str, *args: str) -> dict[str, Any]:
    result = run("status", *args, "--output", "json")
    found = {t["table"]: t for t in json.loads(result.stdout)["tables"]}
    return found[name]


def test_text_shows_the_blocked_table_its_error_and_the_unlock_command(
    run: Run, world: World, stack: StackInfo
) -> None:
    blocked(world)
    result = run("status")
    assert result.exit_code == 1, result.output  # a BLOCKED table is a problem found
    lines = result.stdout.splitlines()
    assert lines[0] == f"gs://{world.store.bucket} on the local stack at {stack.storage_url}"
    header = lines[1].split()
    assert header[:4] == ["TABLE", "HEALTH", "ORDERED", "BACKLOG"]
    orders = next(line for line in lines if line.startswith("sales.orders "))
    assert orders.split()[:7] == ["sales.orders", "BLOCKED", "yes", "3", HOURS[0], "FAILED", world_job()]
    assert "incremental/2024/05/01/12" in orders  # last applied
    clicks = next(line for line in lines if line.startswith("web.clicks "))
    assert clicks.split()[:6] == ["web.clicks", "IDLE", "no", "0", "-", "FREE"]
    text = result.stdout
    assert f"sales.orders is BLOCKED at batch '{HOURS[0]}'" in text
    assert "error:  column 'amount' not found" in text
    assert f"turnstile unlock {world.uri}" in text
    assert result.stderr == ""


def test_the_unlock_command_in_json_runs_as_printed(run: Run, world: World) -> None:
    blocked(world)
    lock = table_json(run, "sales.orders")["lock"]
    program, *args = shlex.split(lock["unlock_command"])
    assert program == "turnstile"
    result = run(*args, lock["unlock_options"][0]["option"], "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert (done["table"], done["skip_head"], done["dropped_pointer"]) == (
        world.uri,
        True,
        world.table.pointer(HOURS[0]),
    )
    assert table_json(run, "sales.orders")["lock"]["state"] == "FREE"


@pytest.mark.parametrize("skip_head", [False, True])
def test_the_unlock_commands_in_text_run_as_printed(run: Run, world: World, skip_head: bool) -> None:
    blocked(world)
    text = run("status").stdout
    commands = [line.split(": ", 1)[1] for line in text.splitlines() if ": turnstile unlock " in line]
    shown = f"turnstile unlock {world.uri} --expect-generation {world.lock_generation()}"
    assert commands == [shown, f"{shown} --skip-head"]
    assert "or, to drop the failed batch's pointer instead of applying it again" in text
    program, *args = shlex.split(commands[skip_head])
    assert program == "turnstile"
    result = run(*args, "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["skip_head"] is skip_head


def world_job() -> str:
    return "turnstile-sales-orders-0123456789abcdef"


def test_json_has_every_field_scripts_need(run: Run, world: World) -> None:
    generations = blocked(world)
    orders = table_json(run, "sales.orders")
    assert orders["health"] == "BLOCKED"
    assert orders["uri"] == world.uri
    assert orders["ordered"] is True
    assert f"gs://{world.store.bucket}/sales/orders/_config/ORDERME" in orders["ordered_by"]
    assert (orders["backlog_depth"], orders["backlog_capped"], orders["backlog_head"]) == (3, False, HOURS[0])
    lock = orders["lock"]
    assert isinstance(lock, dict)
    assert lock["state"] == "FAILED"
    assert lock["generation"] == world.lock_generation()
    assert lock["job_id"] == world_job()
    assert lock["covers"] == [HOURS[0]]
    assert lock["error"] == "column 'amount' not found"
    assert lock["unlock_command"] == (
        f"turnstile unlock {world.uri} --expect-generation {world.lock_generation()}"
    )
    [skip_head] = lock["unlock_options"]
    assert skip_head["option"] == "--skip-head"
    assert skip_head["does"].startswith("drop the failed batch's pointer instead of applying it again")
    assert 0 <= lock["age_seconds"] < 60
    subscriber = orders["subscriber"]
    assert isinstance(subscriber, dict)
    assert subscriber["state"] == "pending" and subscriber["live"] is True  # _BACKFILL, event not handled yet
    assert orders["last_applied"] == "incremental/2024/05/01/12"
    last = orders["last_result"]
    assert isinstance(last, dict)
    assert (last["rel"], last["success_generation"], last["outcome"]) == (
        "incremental/2024/05/01/12",
        7,
        "COMMITTED",
    )
    assert orders["gate"] is None
    clicks = table_json(run, "web.clicks")
    assert clicks["health"] == "IDLE" and clicks["ordered"] is False
    assert clicks["lock"]["generation"] == 0
    assert (clicks["lock"]["unlock_command"], clicks["lock"]["unlock_options"]) == (None, [])
    assert generations  # the pointers were really written by the publisher


def test_a_long_backlog_is_counted_up_to_a_cap(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(status_ops, "BACKLOG_CAP", 3)
    for hour in range(10, 15):
        world.queue(f"incremental/2024/05/01/{hour}")
    orders = table_json(run, "sales.orders")
    assert (orders["backlog_depth"], orders["backlog_capped"]) == (3, True)
    assert orders["backlog_head"] == "incremental/2024/05/01/10"
    line = next(line for line in run("status").stdout.splitlines() if line.startswith("sales.orders"))
    assert line.split()[3] == "3+"


def test_subscriber_states_follow_the_backfill_claim(run: Run, world: World) -> None:
    world.queue(HOURS[0])
    backfill = world.store.stat(world.table.backfill)
    assert backfill is not None
    claim = claim_name(world.table.backfill, backfill.generation)
    now = datetime.now(UTC)
    running = Claim(state=ClaimState.IN_PROGRESS, owner="inv-1", expires_at=now + timedelta(minutes=5))
    world.store.write(claim, running.encode())
    orders = table_json(run, "sales.orders")
    assert orders["health"] == "QUEUED"
    assert orders["subscriber"] == {
        "state": "running",
        "live": True,
        "backfill_generation": backfill.generation,
        "backfill_age_seconds": orders["subscriber"]["backfill_age_seconds"],
        "claim_owner": "inv-1",
        "claim_expires_at": running.expires_at.isoformat(),
    }
    world.store.write(claim, running.model_copy(update={"expires_at": now - timedelta(seconds=1)}).encode())
    orders = table_json(run, "sales.orders")
    assert orders["subscriber"]["state"] == "abandoned"
    assert orders["health"] == "STALLED"
    world.store.write(claim, running.model_copy(update={"state": ClaimState.DONE}).encode())
    assert table_json(run, "sales.orders")["subscriber"]["state"] == "stopped"
    text = run("status").stdout
    assert f"turnstile resume {world.uri}" in text
    world.store.remove(world.table.backfill)
    orders = table_json(run, "sales.orders")
    assert (orders["subscriber"]["state"], orders["health"]) == ("idle", "STALLED")


def test_gate_file(run: Run, world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("START_BACKFILL_FILENAME", "_HISTORYDONE")
    world.store.write(f"{world.table.batch_folder('historical/2023')}_SUCCESS", b"")
    world.store.write(world.table.pointer("historical/2023"), b"{}")  # queued while the gate is shut
    orders = table_json(run, "sales.orders")
    gate = f"{world.uri}/_HISTORYDONE"
    assert (orders["health"], orders["gate"], orders["gate_present"]) == ("GATED", gate, False)
    assert f"holds its backlog until {gate} exists" in run("status").stdout
    world.store.write(f"{world.table.prefix}/_HISTORYDONE", b"")
    assert table_json(run, "sales.orders")["gate_present"] is True


def test_a_prefix_narrows_to_a_dataset_or_one_table(run: Run, world: World) -> None:
    blocked(world)
    world.store.write("sales/refunds/2024/_SUCCESS", b"")
    bucket = world.store.bucket
    dataset = json.loads(run("status", f"gs://{bucket}/sales", "-o", "json").stdout)
    assert [t["table"] for t in dataset["tables"]] == ["sales.orders", "sales.refunds"]
    one = json.loads(run("status", f"gs://{bucket}/web/clicks", "-o", "json").stdout)
    assert [t["table"] for t in one["tables"]] == ["web.clicks"]
    result = run("status", f"gs://{bucket}/web/clicks")
    assert result.exit_code == 0  # that table is fine


def test_empty_bucket(run: Run, world: World) -> None:
    result = run("status")
    assert result.exit_code == 0
    assert "no tables under" in result.stdout
    assert json.loads(run("status", "-o", "json").stdout)["tables"] == []
    del world


def test_without_a_stack_a_bucket_is_needed(
    run: Run, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TURNSTILE_HOME", str(tmp_path))  # no stack.json there
    result = run("status")
    assert result.exit_code == 2
    assert "no bucket given and no local stack" in one_error_line(result)


def test_unknown_bucket_is_one_error_line(run: Run, world: World) -> None:
    result = run("status", "gs://no-such-bucket-here")
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "no-such-bucket-here" in line and "check the bucket name" in line
    del world


def test_a_bad_uri_is_a_usage_error(run: Run) -> None:
    result = run("status", "ftp://nope")  # s3:// is a bucket URI too (tests/cli/test_s3.py)
    assert result.exit_code == 2
    assert "ftp:// is not supported; use gs://BUCKET or s3://BUCKET" in one_error_line(result)
    result = run("status", "nope")
    assert result.exit_code == 2
    assert "is not a gs://BUCKET[/PATH] or s3://BUCKET[/PATH] URI" in one_error_line(result)


def test_a_bucket_that_refuses_access_is_one_line_naming_it_and_the_fix(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Storage answering 403 (a real HTTP server behind the real client): no traceback, one line."""
    handler = type("Refusing", (FlakyStorage,), {"seen": 0, "failures": 10_000, "status": 403})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.server_address[1]}")
        result = run("status", f"gs://locked-bucket/{TABLE}")
    finally:
        server.shutdown()
    assert result.exit_code == 1
    line = one_error_line(result)
    assert "gs://locked-bucket/" in line and "refused access" in line and "403" in line
    assert "roles/storage.objectUser" in line
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.parametrize("output", ["text", "json"])
def test_the_unlock_command_shown_refuses_a_lock_that_changed_since(
    run: Run, world: World, output: str
) -> None:
    blocked(world)
    shown_generation = world.lock_generation()
    if output == "json":
        command = table_json(run, "sales.orders")["lock"]["unlock_command"]
    else:
        text = run("status").stdout
        line = next(line for line in text.splitlines() if "fix the cause, then run: " in line)
        command = line.split(": ", 1)[1]
    assert command.endswith(f" --expect-generation {shown_generation}")
    world.fail(HOURS[0], error="a newer failure", position="incremental/2024/05/01/12")  # the lock moves on
    program, *args = shlex.split(command)
    assert program == "turnstile"
    result = run(*args, "--yes")
    assert result.exit_code == 2
    assert f"not {shown_generation}: it changed since it was read" in one_error_line(result)
    assert table_json(run, "sales.orders")["lock"]["state"] == "FAILED"


@pytest.mark.parametrize(
    "content",
    [b"{not json", b'{"state": "MAYBE"}', b"{}", b'{"job_id": "gcf-ingest-x", "table": {}}'],
    ids=["not-json", "bad-state", "empty-object", "original-loader"],
)
def test_a_lock_holding_garbage_is_unreadable_and_says_what_to_do(
    run: Run, world: World, content: bytes
) -> None:
    world.store.write(world.table.lock, content)
    where = f"gs://{world.store.bucket}/{world.table.lock}"
    orders = table_json(run, "sales.orders")
    assert orders["health"] == "UNREADABLE"
    [error] = orders["errors"]
    assert error.startswith(f"{where} does not hold a turnstile lock (")
    assert f"gcloud storage ls --all-versions {where}" in error
    assert "only when no job runs for the table, delete it" in error
    assert error.endswith(f"then run: turnstile resume {world.uri}")
    result = run("status")
    assert result.exit_code == 1
    assert " ".join(f"sales.orders: {error}".split()) in " ".join(result.stdout.split())  # wrapped lines


def test_json_lists_an_unordered_tables_open_jobs_and_it_is_running(run: Run, world: World) -> None:
    since = datetime(2024, 5, 1, 14, 0, tzinfo=UTC)
    clicks = Table(world.store.bucket, "web/clicks", "web", "clicks")
    world.store.write("web/clicks/$20240501/_SUCCESS", b"")
    for job, rel, cancel in (("j-1", "$20240501", CancelChoice.BLOCK), ("j-2", "$20240502", None)):
        marker = OpenJob(
            job_id=job,
            success=f"web/clicks/{rel}/_SUCCESS",
            success_generation=1,
            rel=rel,
            submitted_at=since,
            cancel=cancel,
        )
        world.store.write(clicks.open_job(job), marker.encode())
    found = table_json(run, "web.clicks")
    assert found["health"] == "RUNNING"
    keys = ("job_id", "rel", "since", "attempt", "cancel_requested")
    shown = [tuple(job[k] for k in keys) for job in found["open_jobs"]]
    assert all(job["age_seconds"] > 0 for job in found["open_jobs"])
    assert shown == [
        ("j-1", "$20240501", since.isoformat(), 0, "block"),
        ("j-2", "$20240502", since.isoformat(), 0, None),
    ]


def test_text_lists_an_unordered_tables_open_jobs_below_the_table(run: Run, world: World) -> None:
    clicks = Table(world.store.bucket, "web/clicks", "web", "clicks")
    world.store.write("web/clicks/$20240501/_SUCCESS", b"")
    marker = OpenJob(
        job_id="j-1",
        success="web/clicks/$20240501/_SUCCESS",
        success_generation=1,
        rel="$20240501",
        submitted_at=datetime.now(UTC) - timedelta(minutes=3),
        cancel=CancelChoice.BLOCK,
    )
    world.store.write(clicks.open_job("j-1"), marker.encode())
    text = run("status").stdout
    assert "web.clicks: job j-1 for batch '$20240501' running since 3m" in text
    assert "cancel requested (block)" in text


def test_a_batch_dropped_by_unlock_skip_head_reads_as_dropped_not_failed(run: Run, world: World) -> None:
    """A late batch dropped by an operator gets a FAILED record (so nothing queues it again); as
    the idle table's last result it is no failure to fix."""
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.result(HOURS[1], 7)
    world.queue(HOURS[0])
    world.fail(HOURS[0], error=f"batch '{HOURS[0]}' arrived after '{HOURS[1]}'", position=HOURS[1])
    unlocked = run("unlock", world.uri, "--skip-head", "--yes")
    assert unlocked.exit_code == 0, unlocked.output
    shown = table_json(run, "sales.orders")
    assert shown["health"] == "IDLE"
    assert (shown["last_result"]["rel"], shown["last_result"]["outcome"]) == (HOURS[0], "DROPPED")
    assert shown["last_commit_lag_seconds"] is None
    text = run("status")
    orders = next(line for line in text.stdout.splitlines() if line.startswith("sales.orders "))
    assert f"{HOURS[0]}: DROPPED 0 rows" in orders
    assert text.exit_code == 0, text.output
