"""Files loaded through a `mapping` of every kind, end to end: fake-gcs-server -> event bridge ->
functions-framework -> local spark-submit -> Iceberg, read back from the warehouse."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from tests.e2e.test_local_stack import _drained, _store, stack, store_host
from turnstile.config.settings import Settings
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack
from turnstile.ops import validate as validate_ops

pytestmark = [pytest.mark.spark, pytest.mark.slow]

__all__ = ["stack"]  # the module's running stack, shared with the other end-to-end tests' fixture

LOAD = {
    "format": "json",
    "max_bad_records": 1,
    "mapping": [
        {"rename": "payload.user.id", "to": "user_id"},
        {"remove": "payload.debug"},
        {"cast": "amount", "type": "decimal(10,2)"},
        {"constant": "source", "value": "web"},
        {"default": "country", "value": "US"},
        {"from_path": "time", "to": "batch_hour"},
        {
            "from_path": "regex",
            "regex": r"^(?P<year>[0-9]{4})/",
            "group": "year",
            "to": "year",
            "type": "int",
        },
    ],
}


def line(n: int, amount: str, country: str | None) -> str:
    payload = {"user": {"id": 100 + n}, "debug": "trace", "kind": "click"}
    return json.dumps({"id": n, "amount": amount, "country": country, "payload": payload})


def test_files_load_through_a_mapping_of_every_kind(stack: Stack, spark: Any) -> None:
    store = _store(stack)
    store.write("demo/mapped/_config/ORDERME", b"")
    store.write("demo/mapped/_config/load.json", json.dumps(LOAD).encode())
    batches = {
        "2024/05/01/10": [line(1, "1.5", "FR"), line(2, "2", None)],
        "2024/05/01/11": [line(3, "3.25", None), line(4, "four", "DE")],  # 4: a bad row
    }
    for rel, lines in batches.items():
        store.write(f"demo/mapped/{rel}/part-0.json", ("\n".join(lines) + "\n").encode())
    for rel in batches:
        store.write(f"demo/mapped/{rel}/_SUCCESS", b"")
    # `turnstile validate` finds the mapping fits both batches (read-only: it runs beside the load).
    settings = Settings.from_env({"STORAGE_EMULATOR_HOST": store_host(stack)})
    checked = validate_ops.validate(store, settings, validate_ops.objects_to_check(store, "demo/mapped"))
    assert (checked.problems, checked.batches) == ([], 2)
    assert wait_until(lambda: _drained(store, "demo/mapped", 2), 300, 1), f"see {stack.home / 'logs'}"

    table = spark.table("local.demo.mapped")
    assert table.columns == [
        "amount",
        "country",
        "id",
        "payload",
        "user_id",
        "source",
        "batch_hour",
        "year",
    ]
    rows = [r.asDict(recursive=True) for r in table.orderBy("id").collect()]
    hour = {10: datetime(2024, 5, 1, 10), 11: datetime(2024, 5, 1, 11)}  # the session reads UTC
    assert rows == [
        {
            "amount": amount,
            "country": country,
            "id": n,
            "payload": {"kind": "click"},
            "user_id": 100 + n,
            "source": "web",
            "batch_hour": hour[h],
            "year": 2024,
        }
        for n, amount, country, h in [
            (1, Decimal("1.50"), "FR", 10),
            (2, Decimal("2.00"), "US", 10),
            (3, Decimal("3.25"), "US", 11),
        ]
    ]
    [bad_rows] = store.list_objects("demo/mapped/_failed/2024/05/01/11/")
    found = store.read(bad_rows.name)
    assert found is not None
    [set_aside] = [json.loads(x) for x in found.text().splitlines()]
    assert (json.loads(set_aside["row"])["id"], set_aside["column"], set_aside["value"]) == (
        4,
        "amount",
        "four",
    )
    assert set_aside["reason"].startswith("mapping[2] (cast 'amount')")
