"""`turnstile.spark.schema`: what must change for a batch to be written to a table, without Spark."""

from __future__ import annotations

import pytest

from turnstile.core.errors import BatchFailed
from turnstile.spark.schema import CLASH_HINT, EVOLVE_HINT, Evolution, plan, widens

TABLE = [("id", "int"), ("name", "string"), ("price", "decimal(10,2)"), ("score", "float")]
HINT = EVOLVE_HINT


def failure(table: list[tuple[str, str]], batch: list[tuple[str, str]], *, evolve: bool) -> str:
    with pytest.raises(BatchFailed) as caught:
        plan(table, batch, evolve=evolve, where="local.ds.t")
    return str(caught.value)


@pytest.mark.parametrize(
    ("narrow", "wide"),
    [
        ("int", "bigint"),
        ("float", "double"),
        ("decimal(10,2)", "decimal(12,2)"),
        ("decimal(1,0)", "decimal(38,0)"),
    ],
)
def test_iceberg_promotions_widen(narrow: str, wide: str) -> None:
    assert widens(narrow, wide)
    assert not widens(wide, narrow)


@pytest.mark.parametrize(
    ("narrow", "wide"),
    [
        ("int", "int"),
        ("int", "double"),  # not a promotion Iceberg allows
        ("bigint", "double"),
        ("int", "string"),
        ("date", "timestamp"),
        ("decimal(10,2)", "decimal(10,2)"),
        ("decimal(10,2)", "decimal(12,3)"),  # the scale may not change
        ("decimal(10,2)", "double"),
        ("smallint", "int"),  # fits (see below) but is no Iceberg promotion
        ("decimal(10, 2)", "decimal(12, 2)"),  # Spark's simple strings have no spaces
    ],
)
def test_other_changes_do_not_widen(narrow: str, wide: str) -> None:
    assert not widens(narrow, wide)


def test_same_columns_in_any_case_and_order_change_nothing() -> None:
    batch = [("SCORE", "float"), ("Name", "string"), ("id", "int"), ("price", "decimal(10,2)")]
    for evolve in (False, True):
        evolution = plan(TABLE, batch, evolve=evolve, where="t")
        assert evolution == Evolution()
        assert evolution.statements("local.ds.t") == []


def test_a_batch_may_miss_table_columns() -> None:
    assert plan(TABLE, [("id", "int")], evolve=False, where="t") == Evolution()
    assert plan(TABLE, [], evolve=False, where="t") == Evolution()


@pytest.mark.parametrize(
    ("table_type", "batch_type"),
    [
        ("bigint", "int"),
        ("double", "float"),
        ("decimal(12,2)", "decimal(10,2)"),
        ("int", "smallint"),  # Iceberg has no smallint/tinyint: tables store them as int
        ("int", "tinyint"),
        ("bigint", "smallint"),
        ("bigint", "tinyint"),
        ("string", "void"),  # an all-null column of a transform
    ],
)
def test_narrower_batch_values_fit_the_table_as_it_is(table_type: str, batch_type: str) -> None:
    for evolve in (False, True):
        assert plan([("c", table_type)], [("c", batch_type)], evolve=evolve, where="t") == Evolution()


def test_with_evolution_new_columns_are_added_and_types_widened() -> None:
    batch = [
        ("id", "bigint"),
        ("name", "string"),
        ("price", "decimal(14,2)"),
        ("score", "double"),
        ("added", "timestamp"),
        ("Tags", "array<string>"),
    ]
    evolution = plan(TABLE, batch, evolve=True, where="t")
    assert evolution == Evolution(
        add=(("added", "timestamp"), ("Tags", "array<string>")),
        widen=(("id", "bigint"), ("price", "decimal(14,2)"), ("score", "double")),
    )
    assert evolution.statements("local.ds.t") == [
        "ALTER TABLE local.ds.t ADD COLUMN `added` timestamp",
        "ALTER TABLE local.ds.t ADD COLUMN `Tags` array<string>",
        "ALTER TABLE local.ds.t ALTER COLUMN `id` TYPE bigint",
        "ALTER TABLE local.ds.t ALTER COLUMN `price` TYPE decimal(14,2)",
        "ALTER TABLE local.ds.t ALTER COLUMN `score` TYPE double",
    ]


def test_without_evolution_every_problem_is_listed_column_by_column_with_the_hint() -> None:
    batch = [("id", "bigint"), ("name", "int"), ("new_one", "string"), ("score", "float"), ("more", "date")]
    assert failure(TABLE, batch, evolve=False) == "\n".join(
        [
            "the batch does not fit table local.ds.t:",
            "  id: table has int, batch has bigint (a widening)",
            "  name: table has string, batch has int: not a change Iceberg allows",
            "  new_one: new column (string), not in the table",
            "  more: new column (date), not in the table",
            HINT,
            CLASH_HINT,
        ]
    )


def test_with_evolution_only_changes_iceberg_forbids_fail_and_there_is_no_hint() -> None:
    batch = [("id", "string"), ("price", "decimal(10,3)"), ("score", "int"), ("fine", "string")]
    message = failure(TABLE, batch, evolve=True)
    assert message == "\n".join(
        [
            "the batch does not fit table local.ds.t:",
            "  id: table has int, batch has string: not a change Iceberg allows",
            "  price: table has decimal(10,2), batch has decimal(10,3): not a change Iceberg allows",
            "  score: table has float, batch has int: not a change Iceberg allows",
            CLASH_HINT,
        ]
    )
    assert "schema_evolution" not in message


def test_narrowing_is_refused_even_with_evolution() -> None:
    message = failure([("n", "bigint")], [("n", "string")], evolve=True)
    assert "n: table has bigint, batch has string" in message
    assert "table has int, batch has string" in failure([("n", "int")], [("n", "string")], evolve=False)
    # a table column wider than the batch is fine, but never narrowed back
    assert plan([("n", "bigint")], [("n", "int")], evolve=True, where="t").widen == ()


@pytest.mark.parametrize("evolve", [False, True])
def test_a_new_column_with_no_type_is_refused(evolve: bool) -> None:
    message = failure(TABLE, [("id", "int"), ("empty", "void")], evolve=evolve)
    assert "  empty: new column with no values (type unknown); give it a type in `schema`" in message


def test_names_compare_case_insensitively_and_keep_the_batch_spelling() -> None:
    evolution = plan([("ID", "int")], [("id", "bigint"), ("New", "string")], evolve=True, where="t")
    assert evolution == Evolution(add=(("New", "string"),), widen=(("id", "bigint"),))


def test_a_type_iceberg_cannot_change_to_is_not_sent_to_schema_evolution() -> None:
    """Only new columns and widenings are what `schema_evolution` allows: a clash alone gets the
    advice that can fix it."""
    message = failure([("qty", "int")], [("qty", "string")], evolve=False)
    assert message.splitlines()[-1] == CLASH_HINT
    assert "schema_evolution" not in message
