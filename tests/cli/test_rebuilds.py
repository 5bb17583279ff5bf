"""`turnstile history` and `turnstile status` of a derived table whose steps a source change rebuilt
or left STALE (the records as the protocol and the job write them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.cli.conftest import Run, World
from turnstile.protocol import rebuilds, reprocess
from turnstile.state.records import BatchOutcome, BatchResult, RebuildCause, ReprocessRequest, StaleStep

STEP = "2026/01/01/11"
AT = datetime(2026, 1, 1, 13, 5, tzinfo=UTC)
CAUSE = RebuildCause(table="staging/sensors", rel=STEP, success_generation=77, at=AT)


def derived(world: World) -> None:
    load = {"derived": {"step": "1h", "start": "2026-01-01T10:00:00Z"}, "depends_on": ["staging.sensors"]}
    world.store.write(f"{world.table.prefix}/_config/load.json", json.dumps(load).encode())


def test_history_shows_a_rebuilt_step_with_its_cause(run: Run, world: World) -> None:
    derived(world)
    world.result(STEP, 1)
    request = rebuilds.request_id(CAUSE, world.table.prefix, STEP)
    record = BatchResult(
        job_id="j2", rel=STEP, success_generation=1, outcome=BatchOutcome.REBUILT, cause=CAUSE, finished_at=AT
    )
    world.store.write(reprocess.result_name(world.table, STEP, 1, request), record.encode())
    report = json.loads(run("history", world.uri, "--output", "json").stdout)
    assert [(e["rel"], e["outcome"]) for e in report["entries"]] == [(STEP, "COMMITTED"), (STEP, "REBUILT")]
    cause = report["entries"][1]["cause"]
    assert (cause["table"], cause["rel"], cause["success_generation"], cause["reprocess"]) == (
        "staging/sensors",
        STEP,
        77,
        None,
    )
    text = run("history", world.uri).stdout
    assert "REBUILT" in text and "rebuilt after staging/sensors" in text


def test_status_shows_pending_rebuilds_and_stale_steps_with_their_command(run: Run, world: World) -> None:
    derived(world)
    world.result(STEP, 1)
    request = rebuilds.request_id(CAUSE, world.table.prefix, STEP)
    pending = ReprocessRequest(
        success=f"{world.table.batch_folder(STEP)}_SUCCESS",
        success_generation=1,
        published_at=AT,
        rel=STEP,
        requested_at=AT,
        cause=CAUSE,
    )
    world.store.write(reprocess.request_name(world.table, request), pending.encode())
    stale = StaleStep(rel="2026/01/01/12", cause=CAUSE, at=AT)
    world.store.write(rebuilds.stale_name(world.table, stale.rel, request), stale.encode())
    result = run("status", world.uri, "--output", "json")
    [shown] = json.loads(result.stdout)["tables"]
    assert (shown["rebuilds_pending"], shown["reprocess_pending"]) == (1, 0)
    assert shown["rebuilds_oldest"] == AT.isoformat()
    command = f"turnstile reprocess {world.uri}/2026/01/01/12"
    [step] = shown["stale_steps"]
    assert (step["rel"], step["source"], step["source_rel"], step["command"]) == (
        "2026/01/01/12",
        "staging/sensors",
        STEP,
        command,
    )
    assert shown["health"] == "FAILED"
    text = run("status", world.uri).stdout
    assert "1 step rebuild(s) pending after a source changed" in text
    assert "step '2026/01/01/12' is STALE: staging/sensors committed '2026/01/01/11'" in text
    assert command in text
