"""`turnstile reprocess`: the request written for a committed batch, and every refusal on one line."""

from __future__ import annotations

import json

from tests.cli.conftest import Run, World, one_error_line
from turnstile.protocol import reprocess
from turnstile.state.records import BatchOutcome, ReprocessRequest

HOURS = [f"incremental/2024/05/01/{h:02d}" for h in range(12, 15)]


def requests(world: World) -> list[ReprocessRequest]:
    found = []
    for info in world.store.list_objects(reprocess.folder(world.table)):
        read = world.store.read(info.name)
        assert read is not None
        found.append(ReprocessRequest.decode(read.data, info.name))
    return found


def test_a_committed_batch_is_requested_after_what_is_queued(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    generations = {rel: world.queue(rel) for rel in HOURS}
    world.result(HOURS[0], generations[HOURS[0]])
    world.store.remove(world.table.pointer(HOURS[0]))  # applied: its pointer is gone
    result = run("reprocess", f"{world.uri}/{HOURS[0]}/", "--reason", "fixed transform", "--output", "json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.stdout)
    assert done["rel"] == HOURS[0] and done["generation"] == generations[HOURS[0]]
    assert done["queued_after"] == HOURS[2]
    [request] = requests(world)
    assert (request.rel, request.success_generation, request.reason) == (
        HOURS[0],
        generations[HOURS[0]],
        "fixed transform",
    )
    assert request.after == world.table.pointer(HOURS[2])
    assert world.store.stat(world.table.backfill) is not None  # the subscriber is woken

    text = run("reprocess", f"{world.uri}/{HOURS[0]}/_SUCCESS")  # the _SUCCESS itself is fine too
    assert text.exit_code == 0, text.output
    assert "will be committed once more after 'incremental/2024/05/01/14'" in text.stdout
    assert f"turnstile history {world.uri}" in text.stdout
    assert len(requests(world)) == 2  # two requests: two more commits
    status = run("status", world.uri, "--output", "json")
    assert json.loads(status.stdout)["tables"][0]["reprocess_pending"] == 2
    shown = run("status", world.uri)
    assert "sales.orders: 2 reprocess request(s) pending" in " ".join(shown.stdout.split())


def test_refusals_name_the_cause_and_what_to_do_and_write_nothing(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    generation = world.queue(HOURS[0])
    never = run("reprocess", f"{world.uri}/{HOURS[0]}")
    assert never.exit_code == 2
    line = one_error_line(never)
    assert "was never committed" in line and "turnstile retry" in line and "turnstile unlock" in line
    missing = run("reprocess", f"{world.uri}/incremental/2024/05/01/23")
    assert missing.exit_code == 2
    assert "does not exist: there is no batch to reprocess there" in one_error_line(missing)
    world.result(HOURS[0], generation, outcome=BatchOutcome.FAILED)
    failed = run("reprocess", f"{world.uri}/{HOURS[0]}")
    assert "was never committed" in one_error_line(failed)
    world.result(HOURS[0], generation)
    world.fail(HOURS[0])
    blocked = run("reprocess", f"{world.uri}/{HOURS[0]}")
    assert blocked.exit_code == 2
    assert f"unlock the table first (turnstile unlock {world.uri})" in one_error_line(blocked)
    bucket = run("reprocess", f"gs://{world.store.bucket}")
    assert bucket.exit_code == 2 and "names a bucket" in one_error_line(bucket)
    assert requests(world) == []
