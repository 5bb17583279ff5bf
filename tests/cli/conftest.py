"""The CLI against fake-gcs-server through a local-stack file, with table states built by the real
protocol pieces (publisher pointers, a FAILED lock as the subscriber writes it, job result records)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from turnstile.cli import app
from turnstile.cli._errors import SCHEME
from turnstile.config.settings import Settings
from turnstile.local import emulator as emu
from turnstile.local.stackinfo import StackInfo
from turnstile.names.paths import Table, parse_success
from turnstile.ops import session
from turnstile.protocol import publisher
from turnstile.protocol.context import Invocation
from turnstile.protocol.lock import unlock_command
from turnstile.state.records import (
    BatchOutcome,
    BatchResult,
    CoveredBatch,
    ExpectationCount,
    Lock,
    LockState,
    Pointer,
)
from turnstile.store.gcs import GcsStore
from turnstile.store.port import ObjectStore

TABLE = "sales/orders"


@pytest.fixture(autouse=True)
def _gs_scheme() -> Iterator[None]:
    """Each test starts as a command does, on a `gs://` URI: a command run before it in this process
    may have named an `s3://` one (`SCHEME` is process state, set by each command)."""
    token = SCHEME.set("gs")
    yield
    SCHEME.reset(token)


@pytest.fixture
def stack(
    tmp_path: Path, gcs_emulator: emu.Emulator, bucket_name: str, monkeypatch: pytest.MonkeyPatch
) -> StackInfo:
    """A local-stack file pointing at the emulator; TURNSTILE_HOME names its folder."""
    home = tmp_path / "home"
    home.mkdir()
    info = StackInfo(
        home=str(home),
        storage_url=gcs_emulator.url,
        function_url="http://127.0.0.1:1",
        bucket=bucket_name,
        warehouse=str(home / "warehouse"),
        catalog="turnstile",
        pid=0,
    )
    info.save()
    monkeypatch.setenv("TURNSTILE_HOME", str(home))
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    for name in ("ORDER_PER_TABLE", "START_BACKFILL_FILENAME", "WAIT_FOR_VALIDATION", "JOB_RUNNER"):
        monkeypatch.delenv(name, raising=False)
    return info


Run = Callable[..., Result]


@pytest.fixture
def run(stack: StackInfo) -> Run:
    """`turnstile ARGS...` in-process; stdout and stderr kept apart."""
    del stack
    runner = CliRunner()

    def invoke(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, list(args), input=input)

    return invoke


def one_error_line(result: Result) -> str:
    """The command failed with exactly one line on stderr, shaped `error: <what>; <what to do>`."""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    assert "; " in lines[0], lines[0]
    return lines[0]


@dataclass
class World:
    """Builds table states in the emulator bucket (or a moto S3 bucket) with the protocol's own writers."""

    store: ObjectStore
    table: Table

    @property
    def inv(self) -> Invocation:
        return session.invocation(self.store, Settings.from_env({}))

    @property
    def uri(self) -> str:
        return self.table.uri

    def upload(self, rel: str, rows: int = 1) -> int:
        """Upstream writes a batch: data, then `_SUCCESS`; returns the `_SUCCESS` generation."""
        folder = self.table.batch_folder(rel)
        self.store.write(f"{folder}part-0.csv", b"id\n" + b"".join(b"%d\n" % i for i in range(rows)))
        return self.store.write(f"{folder}_SUCCESS", b"")

    def queue(self, rel: str) -> int:
        """An ordered batch published: uploaded, then its pointer queued as the publisher does."""
        generation = self.upload(rel)
        batch = parse_success(self.store.bucket, f"{self.table.batch_folder(rel)}_SUCCESS")
        publisher.publish(self.inv, batch, generation)
        return generation

    def fail(self, rel: str, *, error: str = "column 'amount' not found", position: str | None = None) -> int:
        """The lock as the subscriber leaves it when the job failed at batch `rel`."""
        pointer = self.store.read(self.table.pointer(rel))
        assert pointer is not None
        record = Pointer.decode(pointer.data, pointer.name)
        now = datetime.now(UTC)
        lock = Lock(
            state=LockState.FAILED,
            job_id="turnstile-sales-orders-0123456789abcdef",
            covers=(
                CoveredBatch(
                    rel=rel,
                    pointer=pointer.name,
                    pointer_generation=pointer.generation,
                    success_generation=record.success_generation,
                ),
            ),
            acquired_at=now,
            updated_at=now,
            error=error,
            failed_rel=rel,
            unlock_command=unlock_command(self.table, self.store.scheme),
            position=position,
        )
        return self.store.write(self.table.lock, lock.encode())

    def result(
        self,
        rel: str,
        generation: int,
        *,
        outcome: BatchOutcome = BatchOutcome.COMMITTED,
        rows: int = 10,
        bad_rows: int = 0,
        snapshot_id: int | None = 42,
        expectations: tuple[ExpectationCount, ...] = (),
    ) -> None:
        record = BatchResult(
            job_id="turnstile-sales-orders-0123456789abcdef",
            rel=rel,
            success_generation=generation,
            outcome=outcome,
            rows_read=rows + bad_rows,
            rows_written=rows,
            bad_rows=bad_rows,
            seconds=1.5,
            snapshot_id=snapshot_id,
            finished_at=datetime(2024, 5, 1, 14, 0, tzinfo=UTC),
            error="boom" if outcome is BatchOutcome.FAILED else None,
            expectations=expectations,
        )
        self.store.write(self.table.result(rel, generation), record.encode())

    def lock_generation(self) -> int:
        found = self.store.stat(self.table.lock)
        return 0 if found is None else found.generation


@pytest.fixture
def world(gcs_store: GcsStore, stack: StackInfo) -> World:
    del stack
    return World(gcs_store, Table(gcs_store.bucket, TABLE, "sales", "orders"))
