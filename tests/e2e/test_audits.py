"""Audits end to end: fake-gcs-server -> event bridge -> functions-framework -> local spark-submit
-> Iceberg. Each hour of an audited ordered table is committed to its audit branch and published
to `main` only when its audit passes; a failing hour blocks the table without reaching `main`, and
`turnstile unlock --skip-head` (the real CLI) drops it while the next hour is published."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.test_local_stack import _drained, _lock, _store, stack
from turnstile.config.settings import child_environment
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack
from turnstile.names.paths import Table
from turnstile.ops.history import history
from turnstile.state.records import LockState

pytestmark = [pytest.mark.spark, pytest.mark.slow]

__all__ = ["stack"]  # the module's running stack, shared with the other end-to-end tests' fixture

LOAD = {"audits": [{"name": "no_negative_amount", "sql": "SELECT * FROM ${staged} WHERE amount < 0"}]}


def test_a_failing_audit_keeps_its_hour_out_of_main_and_skip_head_drops_it(stack: Stack, spark: Any) -> None:
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
    unlock = [sys.executable, "-m", "turnstile.cli", "unlock", table.uri, "--skip-head", "--yes"]
    environment = child_environment({"TURNSTILE_HOME": str(stack.home)})
    done = subprocess.run(unlock, env=environment, check=False, capture_output=True, text=True)
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
