"""`turnstile backfill`: `_SUCCESS` objects whose events never came go through the handler, once."""

from __future__ import annotations

import json
import os

import pytest

from tests.cli.conftest import Run, World
from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import wiring
from turnstile.jobs.local import job_environment
from turnstile.jobs.port import JobStatus
from turnstile.local.stackinfo import StackInfo
from turnstile.state.records import Manifest, Pointer
from turnstile.store.port import ObjectStore

HOURS = [f"incremental/2024/05/01/{h}" for h in ("13", "14", "15")]


def pointers(world: World) -> dict[str, int]:
    return {
        o.name: o.generation
        for o in world.store.list_objects(world.table.backlog)
        if o.name.endswith("_SUCCESS")
    }


def test_ordered_batches_are_queued_once(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    generations = {rel: world.upload(rel) for rel in HOURS}  # no event was ever delivered
    result = run("backfill", f"{world.uri}", "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["counts"] == {"queued": 3}
    assert [o["object"] for o in report["objects"]] == [f"{world.uri}/{rel}/_SUCCESS" for rel in HOURS]
    queued = pointers(world)
    assert set(queued) == {world.table.pointer(rel) for rel in HOURS}
    for rel, generation in generations.items():
        found = world.store.read(world.table.pointer(rel))
        assert found is not None
        assert Pointer.decode(found.data, found.name).success_generation == generation
    assert world.store.stat(world.table.backfill) is not None  # the deployed subscriber's cue

    again = run("backfill", f"{world.uri}")
    assert again.exit_code == 0
    assert "3 _SUCCESS objects under" in again.stdout and "3 already handled" in again.stdout
    assert pointers(world) == queued  # nothing written again


def test_a_rejected_batch_is_reported_and_fails_the_command(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.upload(HOURS[0])
    world.store.write("sales/bad-name/2024/_SUCCESS", b"")
    result = run("backfill", f"gs://{world.store.bucket}/sales")
    assert result.exit_code == 1
    assert "1 queued, 1 rejected" in result.stdout
    line = next(line for line in result.stdout.splitlines() if "bad-name" in line)
    assert "rejected: " in line and "table name 'bad-name' is not allowed" in line
    assert "run backfill again" in result.stdout


def test_dry_run_lists_and_writes_nothing(run: Run, world: World) -> None:
    generation = world.upload(HOURS[0])
    before = [o.name for o in world.store.list_objects("")]
    result = run("backfill", world.uri, "--dry-run", "-o", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == [
        {"object": f"{world.uri}/{HOURS[0]}/_SUCCESS", "generation": generation}
    ]
    assert [o.name for o in world.store.list_objects("")] == before


class RecordingRunner:
    def __init__(self) -> None:
        self.submitted: list[tuple[str, str]] = []

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self.submitted.append((job_id, manifest_uri))

    def status(self, job_id: str) -> JobStatus | None:
        return None

    def cancel(self, job_id: str) -> None:
        pass


def test_unordered_batches_are_submitted_with_the_configured_runner(
    run: Run, world: World, stack: StackInfo, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = RecordingRunner()
    built: list[Settings] = []

    def job_runner(settings: Settings, store: ObjectStore) -> RecordingRunner:
        built.append(settings)
        return runner

    monkeypatch.setattr(wiring, "job_runner", job_runner)
    world.upload(HOURS[0])
    result = run("backfill", world.uri)
    assert result.exit_code == 0, result.output
    assert "1 submitted" in result.stdout
    [(job_id, manifest_uri)] = runner.submitted
    found = world.store.read(manifest_uri.split(f"gs://{world.store.bucket}/", 1)[1])
    assert found is not None
    manifest = Manifest.decode(found.data, manifest_uri)
    assert (manifest.job_id, manifest.ordered, manifest.batches[0].rel) == (job_id, False, HOURS[0])
    assert built[0].iceberg_catalog == "turnstile"  # the stack's catalog reached the runner's settings
    # a local job's process finds the stack's storage, given to it rather than put in this process
    assert job_environment(built[0])["STORAGE_EMULATOR_HOST"] == stack.storage_url
    assert "STORAGE_EMULATOR_HOST" not in os.environ


def test_without_a_runner_nothing_is_written_and_a_later_run_retries(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_runner(settings: Settings, store: ObjectStore) -> RecordingRunner:
        raise SettingsError("JOB_MAIN_URI is not set; the Dataproc runner needs the staged PySpark main file")

    monkeypatch.setattr(wiring, "job_runner", no_runner)
    generation = world.upload(HOURS[0])
    result = run("backfill", world.uri, "-o", "json")
    assert result.exit_code == 1
    [outcome] = json.loads(result.stdout)["objects"]
    assert outcome["result"] == "error"
    assert "cannot submit jobs from this machine: JOB_MAIN_URI is not set" in outcome["error"]
    # Nothing marks it handled: a later run, on a machine that can submit, still picks it up.
    assert world.store.list_objects(f"{world.table.prefix}/_turnstile/") == []
    assert world.store.stat(f"{world.table.batch_folder(HOURS[0])}_SUCCESS").generation == generation  # type: ignore[union-attr]
