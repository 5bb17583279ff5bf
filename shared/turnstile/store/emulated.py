"""Conditional DELETE on an emulator that ignores its precondition (fake-gcs-server).

Real GCS enforces `ifGenerationMatch` on DELETE; fake-gcs-server does not, which would let the
local stack remove a pointer re-published with a new generation while its job ran (the batch would
never be applied). On the emulator every process of this machine that writes through turnstile
(function hosts, jobs, the CLI) takes one exclusive file lock per emulator around each write, and a
conditional delete checks the live generation and deletes under that lock: no turnstile write can
land between the check and the delete. Real GCS never takes this path.
"""

from __future__ import annotations

import fcntl
import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class WriteLock:
    """An exclusive lock shared by every process writing to one emulator."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @staticmethod
    def for_emulator(host: str) -> WriteLock:
        digest = hashlib.sha256(host.encode()).hexdigest()[:12]
        return WriteLock(Path(tempfile.gettempdir()) / f"turnstile-emulator-{digest}.lock")

    @contextmanager
    def held(self) -> Iterator[None]:
        with self.path.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
