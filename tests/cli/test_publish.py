"""`turnstile publish`: the staged batch of a table blocked by a failed audit accepted as it is,
refused for any other lock or failure."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime

import pytest

from tests.cli.conftest import Run, World, one_error_line
from turnstile.names.publishing import override_name
from turnstile.ops import publish as publish_ops
from turnstile.protocol import operator
from turnstile.protocol.operator import UnlockRefused
from turnstile.state.records import AUDIT_FAILURE, BatchOutcome, BatchResult, Lock, LockState, PublishOverride

HEAD = "incremental/2024/05/01/13"
AUDIT_ERROR = "the audit 'no_negative' (load.json audits[0]) found 2 offending row(s)"


def failed(world: World, *, kind: str | None) -> int:
    """The table blocked on HEAD, whose result record says how it failed; its `_SUCCESS` generation."""
    generation = world.queue(HEAD)
    world.fail(HEAD, error=AUDIT_ERROR if kind else "column 'amount' not found")
    record = BatchResult(
        job_id="turnstile-sales-orders-0123456789abcdef",
        rel=HEAD,
        success_generation=generation,
        outcome=BatchOutcome.FAILED,
        error=AUDIT_ERROR if kind else "column 'amount' not found",
        error_kind=kind,
    )
    world.store.write(world.table.result(HEAD, generation), record.encode())
    return generation


def lock_state(world: World) -> LockState:
    found = world.store.read(world.table.lock)
    assert found is not None
    return Lock.decode(found.data, found.name).state


def test_a_batch_its_audits_failed_is_recorded_as_published_and_the_lock_released(
    run: Run, world: World
) -> None:
    generation = failed(world, kind=AUDIT_FAILURE)
    result = run("publish", world.uri, "--reason", "known refunds", "--by", "ana", "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    name = override_name(world.table.prefix, HEAD, generation)
    assert report == {
        "table": world.uri,
        "released": True,
        "lock_generation": report["lock_generation"],
        "rel": HEAD,
        "success_generation": generation,
        "published_by": "ana",
        "reason": "known refunds",
        "record": f"gs://{world.store.bucket}/{name}",
        "audit_error": AUDIT_ERROR,
    }
    found = world.store.read(name)
    assert found is not None
    record = PublishOverride.decode(found.data, name)
    assert (record.by, record.reason) == ("ana", "known refunds")
    assert lock_state(world) is LockState.FREE


def test_text_output_names_the_batch_and_who_and_defaults_to_the_local_user(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("getpass.getuser", lambda: "local-op")
    generation = failed(world, kind=AUDIT_FAILURE)
    result = run("publish", world.uri, "--yes")
    assert result.exit_code == 0, result.output
    assert f"recorded the publish of batch '{HEAD}' by local-op" in result.stdout
    found = world.store.read(override_name(world.table.prefix, HEAD, generation))
    assert found is not None and PublishOverride.decode(found.data, "x").by == "local-op"


def test_a_batch_that_failed_for_another_reason_is_refused(run: Run, world: World) -> None:
    generation = failed(world, kind=None)
    result = run("publish", world.uri, "--yes")
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"batch '{HEAD}' failed for another reason: column 'amount' not found" in line
    assert "turnstile unlock" in line
    assert lock_state(world) is LockState.FAILED
    assert world.store.read(override_name(world.table.prefix, HEAD, generation)) is None


def test_a_lock_that_is_not_failed_is_refused(run: Run, world: World) -> None:
    world.queue(HEAD)
    result = run("publish", world.uri, "--yes")
    assert result.exit_code == 2
    assert "not FAILED: publish accepts the staged batch of a table blocked by a failed audit" in (
        one_error_line(result)
    )


def test_without_yes_and_without_a_terminal_it_refuses_and_changes_nothing(run: Run, world: World) -> None:
    generation = failed(world, kind=AUDIT_FAILURE)
    result = run("publish", world.uri)
    assert result.exit_code == 2
    assert "pass --yes" in one_error_line(result)
    assert lock_state(world) is LockState.FAILED
    assert world.store.read(override_name(world.table.prefix, HEAD, generation)) is None


def test_history_shows_a_published_batch_with_who_and_why(run: Run, world: World) -> None:
    record = BatchResult(
        job_id="turnstile-sales-orders-0123456789abcdef",
        rel=HEAD,
        success_generation=7,
        outcome=BatchOutcome.PUBLISHED_OVERRIDE,
        snapshot_id=42,
        published_by="ana",
        publish_reason="known refunds",
    )
    world.store.write(world.table.result(HEAD, 7), record.encode())
    report = json.loads(run("history", world.uri, "-o", "json").stdout)
    (entry,) = report["entries"]
    assert (entry["outcome"], entry["published_by"], entry["publish_reason"]) == (
        "PUBLISHED_OVERRIDE",
        "ana",
        "known refunds",
    )
    text = " ".join(run("history", world.uri).stdout.split())
    assert "PUBLISHED_OVERRIDE" in text
    assert "published without its audits by ana: known refunds" in text


def test_status_offers_the_publish_command_for_a_failed_audit_and_it_runs_as_printed(
    run: Run, world: World
) -> None:
    failed(world, kind=AUDIT_FAILURE)
    text = run("status").stdout
    shown = f"turnstile publish {world.uri} --expect-generation {world.lock_generation()}"
    assert f"or, to publish the staged batch to main as it is: {shown}" in text
    report = run("status", "-o", "json")
    (table,) = json.loads(report.stdout)["tables"]
    assert table["lock"]["publish_command"] == shown
    program, *args = shlex.split(shown)
    assert program == "turnstile"
    result = run(*args, "--yes", "-o", "json")
    assert result.exit_code == 0, result.output
    assert lock_state(world) is LockState.FREE


def test_status_offers_no_publish_for_a_batch_that_failed_for_another_reason(run: Run, world: World) -> None:
    failed(world, kind=None)
    assert "turnstile publish" not in run("status").stdout
    (table,) = json.loads(run("status", "-o", "json").stdout)["tables"]
    assert table["lock"]["state"] == "FAILED"
    assert table["lock"]["publish_command"] is None


def test_a_publish_expecting_a_generation_the_lock_left_is_refused(run: Run, world: World) -> None:
    generation = failed(world, kind=AUDIT_FAILURE)
    stale = world.lock_generation() - 1
    result = run("publish", world.uri, "--expect-generation", str(stale), "--yes")
    assert result.exit_code == 2
    assert f"the lock is at generation {world.lock_generation()}, not {stale}" in one_error_line(result)
    assert lock_state(world) is LockState.FAILED
    assert world.store.read(override_name(world.table.prefix, HEAD, generation)) is None


def test_an_unlock_after_a_publish_that_died_before_its_release_withdraws_the_publish(
    run: Run, world: World
) -> None:
    generation = failed(world, kind=AUDIT_FAILURE)
    name = override_name(world.table.prefix, HEAD, generation)
    # What a `turnstile publish` killed between its record and the release leaves: the lock FAILED.
    left = PublishOverride(by="ana", reason="known refunds", at=datetime(2024, 5, 1, 14, tzinfo=UTC))
    world.store.write(name, left.encode())
    result = run("unlock", world.uri, "--yes")  # the operator fixed the data instead: audit it again
    assert result.exit_code == 0, result.output
    assert lock_state(world) is LockState.FREE
    assert world.store.read(name) is None  # the next job audits the batch, never publishes it as is


def test_an_unlock_after_the_publishing_job_died_keeps_the_publish(run: Run, world: World) -> None:
    generation = failed(world, kind=AUDIT_FAILURE)
    result = run("publish", world.uri, "--by", "ana", "--yes")
    assert result.exit_code == 0, result.output
    # The next job published the staged commit, then died before its result record: the lock is
    # FAILED by that job, the batch's record still the audit failure of the one before.
    world.fail(HEAD, error="the job died")
    lock = world.store.read(world.table.lock)
    assert lock is not None
    died = Lock.decode(lock.data, lock.name).model_copy(
        update={"job_id": "turnstile-sales-orders-fedcba9876543210"}
    )
    world.store.write(world.table.lock, died.encode())
    result = run("unlock", world.uri, "--yes")
    assert result.exit_code == 0, result.output
    # Kept: the retry finds the batch on main and records it PUBLISHED_OVERRIDE, by ana.
    assert world.store.read(override_name(world.table.prefix, HEAD, generation)) is not None


def test_a_second_publish_that_read_the_lock_before_the_first_released_it_leaves_its_record(
    world: World,
) -> None:
    """Two runs of `turnstile publish` of one batch (two operators, or one run again): the one that
    read the lock before the other released it is refused, and the record the released one wrote,
    which the batch's next job reads, stays."""
    generation = failed(world, kind=AUDIT_FAILURE)
    first = publish_ops.plan(world.inv, world.table, by="ana", reason="known refunds")
    second = publish_ops.plan(world.inv, world.table, by="bo", reason="known refunds")
    publish_ops.apply(world.inv, first)
    with pytest.raises(UnlockRefused, match="the lock changed since it was read"):
        publish_ops.apply(world.inv, second)
    found = world.store.read(override_name(world.table.prefix, HEAD, generation))
    assert found is not None and PublishOverride.decode(found.data, found.name).by == "ana"
    assert lock_state(world) is LockState.FREE


def test_an_unlock_that_read_the_lock_before_a_publish_released_it_leaves_the_publish_alone(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's `unlock` read the FAILED lock; before it decides, another operator's `turnstile
    publish` writes its record and releases the lock. The unlock must not withdraw that record (the
    batch's next job would audit the batch the publish accepted): it moves the lock first, which
    fails, so it is refused with nothing removed."""
    generation = failed(world, kind=AUDIT_FAILURE)
    name = override_name(world.table.prefix, HEAD, generation)
    deciding = operator._publish_unreleased

    def publish_meanwhile(*args: object, **kwargs: object) -> bool:
        publish_ops.apply(world.inv, publish_ops.plan(world.inv, world.table, by="ana", reason="refunds"))
        return deciding(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(operator, "_publish_unreleased", publish_meanwhile)
    with pytest.raises(UnlockRefused, match="the lock changed while unlocking"):
        operator.unlock(world.inv, world.table, skip_head=False)
    found = world.store.read(name)
    assert found is not None and PublishOverride.decode(found.data, found.name).by == "ana"
    assert lock_state(world) is LockState.FREE  # as the publish released it


def test_a_drop_that_read_the_lock_before_a_publish_released_it_is_refused_with_nothing_removed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An operator's `unlock --skip-head` read the FAILED lock and found no publish record; then,
    as it looks at the batch's pointer, another operator's `turnstile publish` records the batch and
    releases the lock. The drop must not remove the pointer (the publish's next job applies the
    batch from there): it moves the lock first, which fails, so it is refused with the pointer and
    the batch's record as they were."""
    generation = failed(world, kind=AUDIT_FAILURE)
    pointer = world.table.pointer(HEAD, world.inv.settings.success_filename)
    assert world.store.stat(pointer) is not None
    store, looked = world.inv.store, []
    stat = store.stat

    def publish_as_it_looks(name: str) -> object:
        if name == pointer and not looked:
            looked.append(name)
            publish_ops.apply(world.inv, publish_ops.plan(world.inv, world.table, by="ana", reason="refunds"))
        return stat(name)

    monkeypatch.setattr(store, "stat", publish_as_it_looks)
    with pytest.raises(UnlockRefused, match="the lock changed while unlocking"):
        operator.unlock(world.inv, world.table, skip_head=True)
    assert world.store.stat(pointer) is not None  # still queued: the published batch applies
    found = world.store.read(world.table.result(HEAD, generation))
    assert found is not None and BatchResult.decode(found.data, found.name).error == AUDIT_ERROR
    assert world.store.stat(override_name(world.table.prefix, HEAD, generation)) is not None
    assert lock_state(world) is LockState.FREE  # as the publish released it
