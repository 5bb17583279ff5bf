"""Expectations end to end: fake-gcs-server -> event bridge -> functions-framework -> local
spark-submit -> Iceberg. A `drop` expectation sets rows aside and the batch commits; a `fail`
expectation blocks the ordered table like any bad batch, and the history counts both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.test_local_stack import _drained, _lock, _store, stack
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack
from turnstile.names.paths import Table
from turnstile.ops.history import history
from turnstile.state.records import LockState

pytestmark = [pytest.mark.spark, pytest.mark.slow]

__all__ = ["stack"]  # the module's running stack, shared with the other end-to-end tests' fixture

LOAD = {
    "expectations": [
        {"name": "positive_amount", "check": "amount >= 0", "on_fail": "drop"},
        {"name": "has_id", "check": "id IS NOT NULL", "on_fail": "fail"},
    ]
}


def test_a_failing_expectation_blocks_the_ordered_table_and_the_history_counts_each(
    stack: Stack, spark: Any
) -> None:
    store = _store(stack)
    name = "demo/checked"
    table = Table(store.bucket, name, "demo", "checked")
    store.write(f"{name}/_config/ORDERME", b"")
    store.write(f"{name}/_config/load.json", json.dumps(LOAD).encode())
    store.write(f"{name}/2024/05/01/10/part-0.csv", b"id,amount\n1,5\n2,-1\n")
    store.write(f"{name}/2024/05/01/10/_SUCCESS", b"")
    assert wait_until(lambda: _drained(store, name, 1), 300, 1), f"see {stack.home / 'logs'}"
    store.write(f"{name}/2024/05/01/11/part-0.csv", b"id,amount\n3,1\n,2\n")
    store.write(f"{name}/2024/05/01/11/_SUCCESS", b"")
    assert wait_until(lambda: _lock(store, name).state is LockState.FAILED, 300, 1), (
        f"see {stack.home / 'logs'}"
    )

    lock = _lock(store, name)
    error = lock.error or ""
    assert lock.failed_rel == "2024/05/01/11"
    assert "expectation 'has_id' (expectations[1].check: id IS NOT NULL) failed on 1 row(s)" in error
    assert '{"id":null,"amount":2}' in error
    assert f"gs://{store.bucket}/{name}/2024/05/01/11/part-0.csv" in error
    assert store.list_objects(f"{name}/_backlog/2024/05/01/11/")  # the batch is kept, as a bad batch is
    assert [tuple(r) for r in spark.sql("SELECT * FROM local.demo.checked ORDER BY id").collect()] == [(1, 5)]

    entries = history(store, table, success_filename="_SUCCESS", last=None).entries
    assert [(e.rel, e.outcome, e.expectations_text()) for e in entries] == [
        ("2024/05/01/10", "COMMITTED", "positive_amount 1 dropped"),
        ("2024/05/01/11", "FAILED", "has_id 1 failed"),
    ]
    dropped = store.list_objects(f"{name}/_failed/2024/05/01/10/")
    assert [o.name.rpartition("/")[2].split("-")[0] for o in dropped] == ["expectations"]
