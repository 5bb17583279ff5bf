"""transform.sql's placeholders filled as values where they stand (`turnstile.spark.placeholders`),
over SQL cut as Spark's lexer cuts it (`turnstile.spark.lexical`), without Spark. The Spark tests
check the same statements on Spark itself (tests/spark/test_object_names.py, test_job.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from turnstile.spark import lexical, placeholders
from turnstile.spark.lexical import Kind
from turnstile.spark.placeholders import Unfilled

HOSTILE = "x' OR 1=1 -- \\ \" ` */ ;"
VALUES = {
    "table": placeholders.name("local", "ds", "t"),
    "table_name": placeholders.name("t"),
    "odd": placeholders.name("local", "my ds", "a`b"),
    "spaced": placeholders.name("my ds"),
    "rel": placeholders.string(HOSTILE),
    "generation": placeholders.number(7),
    "window_start": placeholders.timestamp(datetime(2026, 1, 1, 5, tzinfo=UTC)),
}
ESCAPED = "x\\' OR 1=1 -- \\\\ \\\" ` */ ;"  # HOSTILE inside '...' or "..."


def cut(sql: str) -> list[tuple[str, str]]:
    return [(part.kind.value, part.text) for part in lexical.segments(sql)]


def test_sql_is_cut_into_code_literals_names_and_comments_as_spark_reads_it() -> None:
    sql = "SELECT 'a\\'b', \"c\", r'd\\', `e``f` -- g 'h\n/* i /* j */ k */ /*+ HINT */ x1r'l'"
    assert cut(sql) == [
        ("code", "SELECT "),
        ("string", "'a\\'b'"),
        ("code", ", "),
        ("string", '"c"'),
        ("code", ", "),
        ("raw", "r'd\\'"),
        ("code", ", "),
        ("name", "`e``f`"),
        ("code", " "),
        ("comment", "-- g 'h\n"),
        ("comment", "/* i /* j */ k */"),
        ("code", " /*+ HINT */ x1r"),  # a hint is SQL; an r inside a word opens no raw literal
        ("string", "'l'"),
    ]
    assert "".join(text for _, text in cut(sql)) == sql


def test_a_line_comment_goes_on_after_a_backslash_at_its_end_and_a_hint_does_not_nest() -> None:
    assert cut("-- a\\\nb\nc") == [("comment", "-- a\\\nb\n"), ("code", "c")]
    assert cut("/* a /*+ b */ c */") == [("comment", "/* a /*+ b */"), ("code", " c */")]


def test_an_unclosed_literal_runs_to_the_end() -> None:
    [code, literal] = lexical.segments("SELECT 'abc")
    assert (code.kind, literal.kind, literal.closed, literal.body) == (Kind.CODE, Kind.STRING, False, "abc")


def test_a_string_placeholder_is_a_whole_literal_in_sql_and_escaped_text_inside_one() -> None:
    sql = "SELECT ${rel}, '${rel}', \"${rel}\", 'at ${rel}!' FROM batch"
    filled = placeholders.fill(sql, VALUES)
    assert filled == f"SELECT '{ESCAPED}', '{ESCAPED}', \"{ESCAPED}\", 'at {ESCAPED}!' FROM batch"
    assert [kind for kind, _ in cut(filled)].count("string") == 4  # and nothing else changed


def test_inside_a_quoted_name_a_backtick_is_doubled() -> None:
    assert placeholders.fill("SELECT 1 AS `${rel}`", VALUES) == "SELECT 1 AS `x' OR 1=1 -- \\ \" `` */ ;`"


def test_a_placeholder_in_a_comment_is_left_as_written() -> None:
    sql = "-- ${rel} and ${nope}\nSELECT 1 /* ${rel} $ */"
    assert placeholders.fill(sql, VALUES) == sql


def test_a_raw_literal_takes_a_value_without_its_quote_and_refuses_one_with_it() -> None:
    for sql, quote in (("SELECT r'${rel}'", "'"), ('SELECT 1,\n  R"${rel}"', '"')):
        with pytest.raises(
            Unfilled, match=f"inside the raw literal on line {sql.count(chr(10)) + 1}: .* holds a {quote}"
        ):
            placeholders.fill(sql, VALUES)
    plain = {"rel": placeholders.string("a\\b")}
    assert placeholders.fill("SELECT r'${rel}'", plain) == "SELECT r'a\\b'"


def test_names_stand_as_they_are_when_plain_and_quoted_when_not() -> None:
    assert placeholders.fill("MERGE INTO ${table} t", VALUES) == "MERGE INTO local.ds.t t"
    assert placeholders.fill("SELECT * FROM ${table}_raw", VALUES) == "SELECT * FROM local.ds.t_raw"
    assert placeholders.fill("SELECT * FROM ${odd}", VALUES) == "SELECT * FROM local.`my ds`.`a``b`"
    assert placeholders.fill("SELECT '${odd}'", VALUES) == "SELECT 'local.my ds.a`b'"


def test_numbers_and_times_are_literals() -> None:
    filled = placeholders.fill("SELECT ${generation}, ${window_start}, '${window_start}'", VALUES)
    assert filled == ("SELECT 7, TIMESTAMP '2026-01-01 05:00:00+00:00', '2026-01-01 05:00:00+00:00'")


def test_a_literal_after_a_word_is_kept_apart_from_it() -> None:
    # r'...' would be a raw literal, in which \' does not escape the quote.
    assert placeholders.fill("SELECT r${rel}", VALUES) == f"SELECT r '{ESCAPED}'"


def test_a_value_that_would_run_into_the_sql_beside_it_is_refused() -> None:
    with pytest.raises(Unfilled, match="a value runs into the SQL beside it"):
        placeholders.fill("SELECT `x`${spaced}", VALUES)  # `x``my ds` would be one name


def test_dollars() -> None:
    assert placeholders.fill("SELECT '$$${rel}', $$x", {"rel": placeholders.string("a")}) == "SELECT '$a', $x"
    with pytest.raises(Unfilled) as caught:
        placeholders.fill("SELECT 1,\n'costs $5'", VALUES)
    assert str(caught.value).startswith(
        "has an unknown placeholder '$' on line 2 (write $$ for a $); known: "
    )
    with pytest.raises(Unfilled, match=r"^has an unknown placeholder 'nope'; known: \$\{table\}, "):
        placeholders.fill("SELECT ${nope}", VALUES)


def test_a_line_break_in_a_value_is_written_as_an_escape() -> None:
    value = {"rel": placeholders.string("a\nb\r")}
    assert placeholders.fill("SELECT ${rel} -- x\n", value) == "SELECT 'a\\nb\\r' -- x\n"


def test_used_names_the_placeholders_outside_comments_in_code_and_literals() -> None:
    sql = "SELECT '${rel}', $generation FROM ${batch} -- not ${staged}\n/* nor ${table} */ WHERE x = '$$'"
    assert placeholders.used(sql) == {"rel", "generation", "batch"}
    assert placeholders.used("SELECT 1") == set()
