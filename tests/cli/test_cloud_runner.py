"""`retry`, `backfill` and `cancel` against real cloud storage never run the job on this machine:
with JOB_RUNNER unset or `local` they refuse, naming JOB_RUNNER, and leave the bucket as it was.
"Real GCS" here is the emulator behind a store the command believes is Google Cloud Storage (no
stack file, no STORAGE_EMULATOR_HOST)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.cli.conftest import Run, World, one_error_line
from turnstile.cli import _target
from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import wiring, wiring_aws
from turnstile.local import stackinfo
from turnstile.local.stackinfo import StackInfo
from turnstile.state.records import BatchFailure, Lock, LockState
from turnstile.store.memory import MemoryStore

REL = "incremental/2024/05/01/13"


@pytest.fixture
def cloud(world: World, stack: StackInfo, monkeypatch: pytest.MonkeyPatch) -> World:
    """No stack file and no emulator host: the command talks to "Google Cloud Storage", whose
    bucket is the emulator's (so no credentials are needed)."""
    (Path(stack.home) / stackinfo.STACK_FILE).unlink()
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-data-project")
    monkeypatch.setattr(wiring, "object_store", lambda settings, bucket: world.store)
    return world


def failed(world: World, rel: str) -> str:
    """An unordered batch whose job failed for good, waiting for `turnstile retry`."""
    generation = world.upload(rel)
    failure = BatchFailure(
        job_id="turnstile-sales-orders-u0123456789abcdef",
        success=f"{world.table.batch_folder(rel)}_SUCCESS",
        success_generation=generation,
        rel=rel,
        error="column 'amount' not found",
        transient=False,
        attempt=1,
        failed_at=datetime.now(UTC),
    )
    name = world.table.failure(rel, generation)
    world.store.write(name, failure.encode())
    return name


def refused_for_job_runner(text: str) -> None:
    assert "JOB_RUNNER is local (its default)" in text, text
    assert "Google Cloud Storage" in text and "local warehouse" in text, text
    assert "JOB_RUNNER=dataproc" in text and "operator_job_env_prefix" in text, text


def test_retry_on_gcs_with_the_local_runner_refuses_and_runs_nothing(
    run: Run, cloud: World, stack: StackInfo
) -> None:
    record = failed(cloud, REL)
    result = run("retry", f"{cloud.uri}/{REL}")
    assert result.exit_code != 0, result.output
    refused_for_job_runner(result.stderr)
    assert cloud.store.stat(record) is not None, "the failure record is kept for a real retry"
    assert not (Path(stack.home) / "jobs").exists(), "no local job was started"
    assert not (Path(stack.home) / "warehouse").exists()


def test_cancel_on_gcs_with_the_local_runner_refuses_before_the_lock_changes(run: Run, cloud: World) -> None:
    cloud.upload(REL)
    running = Lock(state=LockState.RUNNING, job_id="turnstile-sales-orders-0123456789abcdef")
    generation = cloud.store.write(cloud.table.lock, running.encode())
    result = run("cancel", cloud.uri)
    assert result.exit_code == 2, result.output
    refused_for_job_runner(one_error_line(result))
    assert cloud.lock_generation() == generation, "the lock records no cancel"
    assert cloud.store.stat(cloud.table.backfill) is None


def test_retry_with_local_explicitly_is_refused_too(
    run: Run, cloud: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOB_RUNNER", "local")
    failed(cloud, REL)
    result = run("retry", f"{cloud.uri}/{REL}")
    assert result.exit_code != 0
    refused_for_job_runner(result.stderr)


def test_backfill_on_gcs_refuses_unordered_batches_but_queues_ordered_ones(
    run: Run, cloud: World, stack: StackInfo
) -> None:
    cloud.upload(REL)  # unordered: backfill would submit its job
    result = run("backfill", cloud.uri, "--output", "json")
    assert result.exit_code == 1, result.output
    [outcome] = json.loads(result.stdout)["objects"]
    refused_for_job_runner(outcome["error"])
    assert not (Path(stack.home) / "jobs").exists()

    cloud.store.write("sales/orders/_config/ORDERME", b"")  # ordered: only queued, no runner needed
    queued = run("backfill", cloud.uri, "--output", "json")
    assert queued.exit_code == 0, queued.output
    assert json.loads(queued.stdout)["counts"] == {"queued": 1}


@pytest.mark.parametrize(
    ("environ", "scheme", "refused"),
    [
        ({}, "gs", "Google Cloud Storage"),
        ({"JOB_RUNNER": "local"}, "gs", "Google Cloud Storage"),
        ({"STORAGE_EMULATOR_HOST": "http://127.0.0.1:4443"}, "gs", None),
        ({"JOB_RUNNER": "dataproc"}, "gs", None),
        ({}, "s3", "Amazon S3"),
        ({"JOB_RUNNER": "dataproc"}, "s3", "Amazon S3"),  # on S3 anything but emr runs here
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}, "s3", None),
        ({"JOB_RUNNER": "emr"}, "s3", None),
    ],
)
def test_the_runner_is_refused_where_it_is_built(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], scheme: str, refused: str | None
) -> None:
    """The one place that builds the CLI's runner: this machine's only for the stack or an emulator."""
    built = object()
    monkeypatch.setattr(wiring, "job_runner", lambda settings, store: built)
    monkeypatch.setattr(wiring_aws, "job_runner", lambda settings, store: built)
    store = MemoryStore("inbound", scheme=scheme)
    target = _target.Target(Settings.from_env(environ), None, Path("."))
    if refused is None:
        assert target.runner(store) is built
        return
    with pytest.raises(SettingsError, match=f"while this command talks to {refused}: the job would run"):
        target.runner(store)
