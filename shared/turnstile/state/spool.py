"""The spool between the local runner and its warm Spark driver (stdlib only, on both sides).

A spool is a folder: `queue/` holds one JSON request per job, named so that names sort in
submission order; the driver claims the first by renaming it into `running/` (a rename succeeds
once, so a withdrawn request is never run); `worker.json` names the driver's process group; `lock`
serialises "is the driver alive, then queue" (submitters) against "is the queue empty, then exit"
(an idle driver), so no request is queued to a driver that is leaving.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

QUEUE = "queue"
RUNNING = "running"
WORKER = "worker.json"
LOCK = "lock"


def write_json(path: Path, value: dict[str, Any]) -> None:
    """Atomically: a reader never sees half a file."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(value, indent=1))
    partial.replace(path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        loaded: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return loaded


def prepare(spool: Path) -> None:
    (spool / QUEUE).mkdir(parents=True, exist_ok=True)
    (spool / RUNNING).mkdir(exist_ok=True)


@contextmanager
def locked(spool: Path) -> Iterator[None]:
    prepare(spool)
    with (spool / LOCK).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def entry_name() -> str:
    """Sorts after every name made before it (under the lock, so across processes too)."""
    return f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.json"


def enqueue(spool: Path, name: str, request: dict[str, Any]) -> None:
    prepare(spool)
    write_json(spool / QUEUE / name, request)


def queued(spool: Path) -> list[str]:
    folder = spool / QUEUE
    return sorted(n for n in os.listdir(folder) if n.endswith(".json")) if folder.is_dir() else []


def take(spool: Path) -> tuple[Path, dict[str, Any]] | None:
    """Claim the oldest request: its file under `running/` (delete it when done) and its content."""
    for name in queued(spool):
        claimed = spool / RUNNING / name
        try:
            os.replace(spool / QUEUE / name, claimed)
        except FileNotFoundError:
            continue  # withdrawn (cancelled) meanwhile
        request = read_json(claimed)
        if request is not None:
            return claimed, request
    return None


def put_back(spool: Path, claimed: Path) -> None:
    """Return a claimed request to the queue under its name: it keeps its place in the order."""
    os.replace(claimed, spool / QUEUE / claimed.name)


def lost(spool: Path, name: str) -> bool:
    """Whether a request is in neither `queue/` nor `running/`: withdrawn, finished, or discarded
    by a driver that was not the one it was queued to."""
    return not (spool / QUEUE / name).exists() and not (spool / RUNNING / name).exists()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def withdraw(spool: Path, name: str) -> bool:
    """Take a request back before the driver claims it; False when it was already claimed."""
    try:
        os.remove(spool / QUEUE / name)
    except FileNotFoundError:
        return False
    return True
