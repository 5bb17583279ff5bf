"""Deterministic job ids (turnstile.protocol.jobids): stable, distinct, and always valid for Dataproc."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from turnstile.config.settings import Settings
from turnstile.jobs.dataproc import request_id
from turnstile.names.paths import IDENTIFIER, Table
from turnstile.protocol.jobids import ordered_job_id, unordered_job_id

# Dataproc batch ids: 4-63 characters, lowercase letters, digits and hyphens, starting and ending
# with a letter or digit.
DATAPROC_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,61}[a-z0-9]$")

identifiers = st.from_regex(IDENTIFIER, fullmatch=True)
# What Settings accepts as JOB_PREFIX: up to 20 characters, starting with a letter.
prefixes = st.from_regex(r"[a-z][a-z0-9-]{0,19}", fullmatch=True)
generations = st.integers(min_value=0, max_value=2**63 - 1)
pointers = st.text(min_size=0, max_size=300)


def table(dataset: str, tbl: str, bucket: str = "bkt") -> Table:
    return Table(bucket, f"{dataset}/{tbl}", dataset, tbl)


TBL = table("sales", "orders")
POINTER = "sales/orders/_backlog/2024/01/01/00/_SUCCESS"


def test_ordered_id_is_deterministic_and_readable() -> None:
    first = ordered_job_id("turnstile", TBL, POINTER, 11, 22)
    assert first == ordered_job_id("turnstile", TBL, POINTER, 11, 22)
    assert first.startswith("turnstile-sales-orders-")
    assert DATAPROC_ID.match(first)


def test_unordered_id_is_deterministic_and_readable() -> None:
    first = unordered_job_id("turnstile", TBL, "2024/01/01/00", 11)
    assert first == unordered_job_id("turnstile", TBL, "2024/01/01/00", 11)
    assert first.startswith("turnstile-sales-orders-u")
    assert DATAPROC_ID.match(first)


@pytest.mark.parametrize(
    "changed",
    [
        {"prefix": "other"},
        {"table": table("sales", "refunds")},
        {"table": table("sales", "orders", bucket="elsewhere")} | {"same": True},
        {"head_pointer": "sales/orders/_backlog/2024/01/01/01/_SUCCESS"},
        {"head_generation": 12},
        {"lock_generation": 23},
    ],
    ids=["prefix", "table", "bucket", "pointer", "head-generation", "lock-generation"],
)
def test_ordered_id_changes_with_every_input_but_the_bucket(changed: dict) -> None:
    base = {
        "prefix": "turnstile",
        "table": TBL,
        "head_pointer": POINTER,
        "head_generation": 11,
        "lock_generation": 22,
    }
    same = changed.pop("same", False)
    a = ordered_job_id(**base)
    b = ordered_job_id(**(base | changed))
    # The bucket is not part of the identity: job ids are unique per project and region.
    assert (a == b) is same


@pytest.mark.parametrize(
    "changed",
    [
        {"prefix": "other"},
        {"table": table("sales", "refunds")},
        {"rel": "2024/01/01/01"},
        {"success_generation": 12},
    ],
    ids=["prefix", "table", "rel", "success-generation"],
)
def test_unordered_id_changes_with_every_input(changed: dict) -> None:
    base = {"prefix": "turnstile", "table": TBL, "rel": "2024/01/01/00", "success_generation": 11}
    assert unordered_job_id(**base) != unordered_job_id(**(base | changed))


def test_ordered_and_unordered_ids_never_coincide() -> None:
    assert ordered_job_id("t", TBL, "x", 1, 1) != unordered_job_id("t", TBL, "x", 1)


def test_tables_whose_slugs_coincide_still_get_distinct_ids() -> None:
    # "a_b/c" and "a/b_c" both slug to "a-b-c": the digest of the full prefix tells them apart.
    one, two = table("a_b", "c"), table("a", "b_c")
    assert ordered_job_id("t", one, "p", 1, 1) != ordered_job_id("t", two, "p", 1, 1)
    assert unordered_job_id("t", one, "r", 1) != unordered_job_id("t", two, "r", 1)


def test_default_prefix_of_settings_makes_valid_ids() -> None:
    prefix = Settings.from_env({}).job_prefix
    assert DATAPROC_ID.match(ordered_job_id(prefix, TBL, POINTER, 1, 2))
    assert DATAPROC_ID.match(unordered_job_id(prefix, TBL, "", 1))


@pytest.mark.parametrize(
    ("dataset", "tbl"),
    [("_", "_"), ("__", "___"), ("A" * 128, "B" * 128), ("_9", "x"), ("Sales_2024", "Orders__")],
)
def test_edge_identifiers_make_valid_ids(dataset: str, tbl: str) -> None:
    t = table(dataset, tbl)
    for prefix in ("t", "a-", "z" * 20, "a" + "-" * 19):
        assert DATAPROC_ID.match(ordered_job_id(prefix, t, "p", 0, 0))
        assert DATAPROC_ID.match(unordered_job_id(prefix, t, "", 0))


@settings(max_examples=120, deadline=None)
@given(
    prefix=prefixes,
    dataset=identifiers,
    tbl=identifiers,
    pointer=pointers,
    head_generation=generations,
    lock_generation=generations,
)
def test_ordered_ids_always_match_the_dataproc_rule(
    *, prefix: str, dataset: str, tbl: str, pointer: str, head_generation: int, lock_generation: int
) -> None:
    job_id = ordered_job_id(prefix, table(dataset, tbl), pointer, head_generation, lock_generation)
    assert DATAPROC_ID.match(job_id), job_id
    assert job_id == ordered_job_id(prefix, table(dataset, tbl), pointer, head_generation, lock_generation)
    assert len(request_id(job_id)) <= 40


@settings(max_examples=120, deadline=None)
@given(prefixes, identifiers, identifiers, pointers, generations)
def test_unordered_ids_always_match_the_dataproc_rule(
    prefix: str, dataset: str, tbl: str, rel: str, generation: int
) -> None:
    job_id = unordered_job_id(prefix, table(dataset, tbl), rel, generation)
    assert DATAPROC_ID.match(job_id), job_id
    assert len(request_id(job_id)) <= 40


@settings(max_examples=100, deadline=None)
@given(dataset=identifiers, tbl=identifiers, p1=pointers, p2=pointers, g1=generations, g2=generations)
def test_distinct_inputs_give_distinct_ordered_ids(
    *, dataset: str, tbl: str, p1: str, p2: str, g1: int, g2: int
) -> None:
    assume((p1, g1) != (p2, g2))
    t = table(dataset, tbl)
    assert ordered_job_id("t", t, p1, g1, 5) != ordered_job_id("t", t, p2, g2, 5)
    assert ordered_job_id("t", t, p1, 5, g1) != ordered_job_id("t", t, p2, 5, g2)


def test_request_id_is_deterministic_short_and_distinct() -> None:
    a = ordered_job_id("turnstile", TBL, POINTER, 1, 2)
    b = ordered_job_id("turnstile", TBL, POINTER, 1, 3)
    assert request_id(a) == request_id(a)
    assert request_id(a) != request_id(b)
    assert len(request_id(a)) <= 40
    assert re.fullmatch(r"[a-z0-9_-]+", request_id(a))


def test_a_reused_ordered_state_names_a_new_valid_job_per_reuse() -> None:
    ids = [ordered_job_id("turnstile", TBL, POINTER, 1, 0, reuse=reuse) for reuse in range(100)]
    assert len(set(ids)) == 100
    assert ids[0] == ordered_job_id("turnstile", TBL, POINTER, 1, 0)
    assert all(DATAPROC_ID.match(job_id) for job_id in ids)
