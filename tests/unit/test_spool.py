"""The spool between the local runner and its warm driver: order, a single claim, withdrawal."""

from __future__ import annotations

from pathlib import Path

from turnstile import spool


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
