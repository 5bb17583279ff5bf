"""`turnstile unlock` and `turnstile resume`: a FAILED lock released only when confirmed and unchanged."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import Run, World, one_error_line
from turnstile.cli import _confirm as asking
from turnstile.state.records import Lock, LockState

HEAD = "incremental/2024/05/01/13"
NEXT = "incremental/2024/05/01/14"


@pytest.fixture
def failed(world: World) -> World:
    world.queue(HEAD)
    world.queue(NEXT)
    world.fail(HEAD, position="incremental/2024/05/01/12")
    return world


def lock_of(world: World) -> Lock:
    found = world.store.read(world.table.lock)
    assert found is not None
    return Lock.decode(found.data, found.name)


def backfill_generation(world: World) -> int | None:
    found = world.store.stat(world.table.backfill)
    return None if found is None else found.generation


def test_without_yes_and_without_a_terminal_it_refuses(run: Run, failed: World) -> None:
    before = failed.lock_generation()
    result = run("unlock", failed.uri)
    assert result.exit_code == 2
    assert "pass --yes" in one_error_line(result)
    assert failed.lock_generation() == before
    assert lock_of(failed).state is LockState.FAILED
    assert f"failed batch     {HEAD}" in result.stdout  # the lock was shown first
    assert "column 'amount' not found" in result.stdout
    # before the question: a config fix needs the functions' config cache to age out first
    assert "within CONFIG_CACHE_SECONDS (60 s by default) of its upload" in " ".join(result.stdout.split())


def test_yes_releases_the_lock_retries_the_batch_and_restarts_the_subscriber(run: Run, failed: World) -> None:
    pointer = failed.store.stat(failed.table.pointer(HEAD))
    assert pointer is not None
    backfill_before = backfill_generation(failed)
    result = run("unlock", failed.uri, "--yes")
    assert result.exit_code == 0, result.output
    lock = lock_of(failed)
    assert lock.state is LockState.FREE
    assert lock.position == "incremental/2024/05/01/12"  # the failed batch is still to apply
    assert lock.allow_late == pointer.name
    still = failed.store.stat(failed.table.pointer(HEAD))
    assert still is not None and still.generation == pointer.generation
    assert backfill_generation(failed) not in (None, backfill_before)
    out = result.stdout
    assert f"released the FAILED lock of {failed.uri}" in out
    assert f"batch '{HEAD}' will be applied again" in out
    assert "restarted the subscriber" in out


def test_skip_head_drops_the_pointer(run: Run, failed: World) -> None:
    result = run("unlock", failed.uri, "--yes", "--skip-head", "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report == {
        "table": failed.uri,
        "released": True,
        "lock_generation": report["lock_generation"],
        "failed_rel": HEAD,
        "job_id": "turnstile-sales-orders-0123456789abcdef",
        "skip_head": True,
        "dropped_pointer": failed.table.pointer(HEAD),
        "pointer_removed_by_hand": False,
        "batch_retried": False,
        "dependents": [],
        "subscriber_restarted": True,
    }
    assert failed.store.stat(failed.table.pointer(HEAD)) is None
    assert failed.store.stat(failed.table.pointer(NEXT)) is not None
    lock = lock_of(failed)
    assert (lock.state, lock.position) == (LockState.FREE, HEAD)


@pytest.mark.parametrize("newer_upload", [False, True])
def test_skip_head_drops_a_pointer_published_again_for_the_same_upload_but_not_for_a_newer_one(
    run: Run, failed: World, newer_upload: bool
) -> None:
    """A duplicate event of the failed batch's `_SUCCESS` rewrote its pointer after the lock was
    taken (a new pointer generation, the same upload): dropping the head drops it, or the
    subscriber would apply the batch the operator dropped. A pointer of a newer upload stays."""
    pointer = failed.table.pointer(HEAD)
    found = failed.store.read(pointer)
    assert found is not None
    if newer_upload:
        failed.queue(HEAD)  # uploaded again: a new _SUCCESS generation, its pointer replaced
    else:
        failed.store.write(pointer, found.data)  # the same upload, published again
    result = run("unlock", failed.uri, "--yes", "--skip-head", "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dropped_pointer"] == (None if newer_upload else pointer)
    assert (failed.store.stat(pointer) is None) is not newer_upload


def test_skip_head_text(run: Run, failed: World) -> None:
    result = run("unlock", failed.uri, "--yes", "--skip-head")
    assert result.exit_code == 0
    assert f"dropped the pointer of batch '{HEAD}'" in result.stdout


def test_skip_head_names_the_dependents_that_will_build_the_period_without_the_batch(
    run: Run, failed: World
) -> None:
    failed.store.write(
        f"{failed.table.prefix}/_turnstile/dependents/marts~daily.json", b'{"table": "marts/daily"}'
    )
    result = run("unlock", failed.uri, "--yes", "--skip-head")
    assert result.exit_code == 0, result.output
    assert (
        f"tables that depend on it (marts/daily) will build the period of batch '{HEAD}' without it; to "
        "hold them back, turnstile pause them first"
    ) in " ".join(result.stdout.split())


def test_resume_starts_a_new_derived_table_as_an_ordered_one(run: Run, world: World) -> None:
    world.store.write(
        "marts/fact/_config/load.json",
        b'{"derived": {"step": "1h", "start": "2024-05-01T00:00:00Z"}, "depends_on": ["sales.orders"]}',
    )
    result = run("resume", f"gs://{world.store.bucket}/marts/fact")
    assert result.exit_code == 0, result.output
    assert "restarted the subscriber of" in result.stdout
    assert "held while paused" not in result.stdout


def test_a_lock_changed_since_it_was_shown_is_not_released(
    run: Run, failed: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator reads the lock, and while they confirm, something rewrites it."""
    monkeypatch.setattr(asking, "_interactive", lambda: True)

    def confirm_while_it_changes(question: str) -> bool:
        assert failed.uri in question
        failed.fail(HEAD, error="a different failure", position="incremental/2024/05/01/12")
        return True

    monkeypatch.setattr(asking, "_confirm", confirm_while_it_changes)
    result = run("unlock", failed.uri)
    assert result.exit_code == 2
    assert "changed since it was read" in one_error_line(result)
    lock = lock_of(failed)
    assert (lock.state, lock.error) == (LockState.FAILED, "a different failure")
    assert failed.store.stat(failed.table.pointer(HEAD)) is not None


def test_expect_generation_from_status_json(run: Run, failed: World) -> None:
    shown = json.loads(run("status", failed.uri, "-o", "json").stdout)["tables"][0]["lock"]["generation"]
    failed.fail(HEAD, error="rewritten", position="incremental/2024/05/01/12")
    result = run("unlock", failed.uri, "--yes", "--expect-generation", str(shown))
    assert result.exit_code == 2
    assert f"not {shown}: it changed since it was read" in one_error_line(result)
    assert lock_of(failed).state is LockState.FAILED
    current = failed.lock_generation()
    assert run("unlock", failed.uri, "--yes", "--expect-generation", str(current)).exit_code == 0
    assert lock_of(failed).state is LockState.FREE


def test_confirmation_declined(run: Run, failed: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asking, "_interactive", lambda: True)
    result = run("unlock", failed.uri, input="n\n")
    assert result.exit_code == 2
    prompt, _, error = result.stderr.partition("[y/N]:")  # the prompt goes to stderr, not stdout
    assert prompt == f"unlock {failed.uri}? "
    assert error.strip() == "error: not confirmed; the lock was left as it is"
    assert "[y/N]" not in result.stdout
    assert lock_of(failed).state is LockState.FAILED


def test_confirmation_accepted(run: Run, failed: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(asking, "_interactive", lambda: True)
    result = run("unlock", failed.uri, input="y\n")
    assert result.exit_code == 0, result.output
    assert lock_of(failed).state is LockState.FREE


def test_a_lock_that_is_not_failed_is_refused(run: Run, world: World) -> None:
    world.queue(HEAD)
    result = run("unlock", world.uri, "--yes")
    assert result.exit_code == 2
    assert "the lock is FREE, not FAILED" in one_error_line(result)


def test_unlock_needs_a_table(run: Run, world: World) -> None:
    result = run("unlock", f"gs://{world.store.bucket}/sales", "--yes")
    assert result.exit_code == 2
    assert "does not name a table" in one_error_line(result)


def test_resume_writes_a_new_backfill(run: Run, world: World) -> None:
    world.upload("2024/05/01/13")
    result = run("resume", world.uri, "-o", "json")
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report == {
        "table": world.uri,
        "backfill_generation": backfill_generation(world),
        "lock": "FREE",
        "pause_lifted": False,
    }
    again = run("resume", world.uri)
    assert again.exit_code == 0
    generation = backfill_generation(world)
    assert generation is not None and generation > report["backfill_generation"]
    assert f"_BACKFILL generation {generation}" in again.stdout


def test_resume_on_a_blocked_table_says_to_unlock(run: Run, failed: World) -> None:
    result = run("resume", failed.uri)
    assert result.exit_code == 0
    assert f"fix the cause, then run: turnstile unlock {failed.uri}" in result.stdout


def test_a_failed_batch_whose_pointer_was_removed_by_hand_is_dropped_not_promised_again(
    run: Run, failed: World
) -> None:
    failed.store.remove(failed.table.pointer(HEAD))  # the original's way to skip a batch
    result = run("unlock", failed.uri, "--yes")
    assert result.exit_code == 0, result.output
    assert f"the pointer of batch '{HEAD}' had been removed by hand: the batch is dropped" in result.stdout
    assert "will be applied again" not in result.stdout
    assert lock_of(failed).position == HEAD
