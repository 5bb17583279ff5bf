"""The spool between the local runner and its warm driver: order, a single claim, withdrawal."""

from __future__ import annotations

import subprocess
from pathlib import Path

from turnstile.state import spool


def test_requests_are_taken_in_submission_order_once_each(tmp_path: Path) -> None:
    names = []
    with spool.locked(tmp_path):
        for job in ("a", "b", "c"):
            name = spool.entry_name()
            spool.enqueue(tmp_path, name, {"job_id": job})
            names.append(name)
    assert spool.queued(tmp_path) == names
    taken = []
    while (claimed := spool.take(tmp_path)) is not None:
        path, request = claimed
        assert path.parent.name == spool.RUNNING
        taken.append(request["job_id"])
    assert taken == ["a", "b", "c"]
    assert spool.queued(tmp_path) == []


def test_a_withdrawn_request_is_never_taken_and_a_taken_one_cannot_be_withdrawn(tmp_path: Path) -> None:
    first, second = spool.entry_name(), spool.entry_name()
    spool.enqueue(tmp_path, first, {"job_id": "first"})
    spool.enqueue(tmp_path, second, {"job_id": "second"})
    assert spool.withdraw(tmp_path, second)
    claimed = spool.take(tmp_path)
    assert claimed is not None and claimed[1] == {"job_id": "first"}
    assert not spool.withdraw(tmp_path, first)  # already running
    assert spool.take(tmp_path) is None


def test_a_driver_leaves_a_request_queued_to_another_live_driver_and_exits(tmp_path: Path) -> None:
    """A replaced driver (its JVM died, the runner started another on the same spool) must not
    run or discard the new driver's requests: it puts the request back and leaves."""
    from turnstile.spark import warm  # imports pyspark

    with subprocess.Popen(["sleep", "30"]) as other:
        name = spool.entry_name()
        spool.enqueue(tmp_path, name, {"job_id": "new", "worker": other.pid})
        ran: list[str] = []
        code = warm.serve(None, tmp_path, 5.0, lambda *_: ran.append("ran") or 0)  # type: ignore[arg-type]
        other.kill()
    assert code == 1
    assert ran == []
    assert spool.queued(tmp_path) == [name]  # where the new driver takes it


def test_a_driver_drops_a_request_queued_to_a_driver_that_died(tmp_path: Path) -> None:
    from turnstile.spark import warm  # imports pyspark

    with subprocess.Popen(["true"]) as dead:
        dead.wait()
    spool.enqueue(tmp_path, spool.entry_name(), {"job_id": "old", "worker": dead.pid})
    assert warm.serve(None, tmp_path, 0.2, lambda *_: 0) == 0  # type: ignore[arg-type]
    assert spool.queued(tmp_path) == []
    assert not any((tmp_path / spool.RUNNING).iterdir())
