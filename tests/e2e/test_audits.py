"""Audits end to end: fake-gcs-server -> event bridge -> functions-framework -> local spark-submit
-> Iceberg. Each hour of an audited ordered table is committed to its audit branch and published
to `main` only when its audit passes; a failing hour blocks the table without reaching `main`,
`turnstile unlock --skip-head` (the real CLI) drops it while the next hour is published, and the
`turnstile publish` command `status` prints accepts another failing hour as it is staged."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.test_local_stack import _drained, _lock, _store, stack
from turnstile.config.settings import child_environment
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack
from turnstile.names.paths import Table
from turnstile.ops.history import Entry, history
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore

pytestmark = [pytest.mark.spark, pytest.mark.slow]

__all__ = ["stack"]  # the module's running stack, shared with the other end-to-end tests' fixture

LOAD = {"audits": [{"name": "no_negative_amount", "sql": "SELECT * FROM ${staged} WHERE amount < 0"}]}


def test_a_failing_audit_keeps_its_hour_out_of_main_skip_head_drops_it_and_publish_accepts_one(
    stack: Stack, spark: Any
) -> None:
    store = _store(stack)
    name = "demo/audited"
    table = Table(store.bucket, name, "demo", "audited")
    store.write(f"{name}/_config/ORDERME", b"")
    store.write(f"{name}/_config/load.json", json.dumps(LOAD).encode())
    for hour, rows in (("10", "1,5\n"), ("11", "2,-1\n")):
        store.write(f"{name}/2024/05/01/{hour}/part-0.csv", b"id,amount\n" + rows.encode())
        store.write(f"{name}/2024/05/01/{hour}/_SUCCESS", b"")
    logs = f"see {stack.home / 'logs'}"
    assert wait_until(lambda: _lock(store, name).state is LockState.FAILED, 300, 1), logs

    lock = _lock(store, name)
    error = lock.error or ""
    assert lock.failed_rel == "2024/05/01/11"
    assert "the audit 'no_negative_amount' (load.json audits[0]) found 1 offending row(s)" in error
    assert '{"id":2,"amount":-1}' in error and "VERSION AS OF" in error
    main = "SELECT id, amount FROM local.demo.audited ORDER BY id"
    assert [tuple(r) for r in spark.sql(main).collect()] == [(1, 5)]  # main never held hour 11

    store.write(f"{name}/2024/05/01/12/part-0.csv", b"id,amount\n3,7\n")
    store.write(f"{name}/2024/05/01/12/_SUCCESS", b"")
    done = _turnstile(stack, "unlock", table.uri, "--skip-head", "--yes")
    assert done.returncode == 0, done.stderr
    assert wait_until(lambda: _drained(store, name, 3), 300, 1), logs

    spark.sql("REFRESH TABLE local.demo.audited")
    assert [tuple(r) for r in spark.sql(main).collect()] == [(1, 5), (3, 7)]
    entries = history(store, table, success_filename="_SUCCESS", last=None).entries
    assert [(e.rel, e.outcome) for e in entries] == [
        ("2024/05/01/10", "COMMITTED"),
        ("2024/05/01/11", "DROPPED"),
        ("2024/05/01/12", "COMMITTED"),
    ]

    # Hour 13 fails its audit too, and is accepted as it is with the command status prints.
    store.write(f"{name}/2024/05/01/13/part-0.csv", b"id,amount\n4,-2\n")
    store.write(f"{name}/2024/05/01/13/_SUCCESS", b"")
    assert wait_until(lambda: _lock(store, name).state is LockState.FAILED, 300, 1), logs
    shown = _turnstile(stack, "status", table.uri, "-o", "json")
    (row,) = json.loads(shown.stdout)["tables"]
    program, *args = shlex.split(row["lock"]["publish_command"])
    assert program == "turnstile"
    done = _turnstile(stack, *args, "--reason", "a known refund", "--by", "ana", "--yes")
    assert done.returncode == 0, done.stderr
    assert wait_until(lambda: _drained(store, name, 4) and _last(store, table).outcome != "FAILED", 300, 1), (
        logs
    )
    spark.sql("REFRESH TABLE local.demo.audited")
    assert [tuple(r) for r in spark.sql(main).collect()] == [(1, 5), (3, 7), (4, -2)]
    last = _last(store, table)
    assert (last.rel, last.outcome, last.published_by) == ("2024/05/01/13", "PUBLISHED_OVERRIDE", "ana")


def _last(store: GcsStore, table: Table) -> Entry:
    return history(store, table, success_filename="_SUCCESS", last=None).entries[-1]


def _turnstile(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI against the local stack."""
    command = [sys.executable, "-m", "turnstile.cli", *args]
    environment = child_environment({"TURNSTILE_HOME": str(stack.home)})
    return subprocess.run(command, env=environment, check=False, capture_output=True, text=True)
