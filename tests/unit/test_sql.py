"""`turnstile.spark.sql`: the SQL text the job runs, checked without Spark."""

from __future__ import annotations

import pytest

from turnstile.core.errors import BatchFailed
from turnstile.spark import placeholders, sql

TABLE = "local.ds.t"
PLACES = {
    "table": placeholders.name("local", "ds", "t"),
    "catalog": placeholders.name("local"),
    "dataset": placeholders.name("ds"),
    "table_name": placeholders.name("t"),
    "rel": placeholders.string("2024/05/01"),
    "generation": placeholders.number(7),
}


def test_quote_wraps_a_name_in_backticks_and_doubles_a_backtick_inside() -> None:
    assert sql.quote("id") == "`id`"
    assert sql.quote("odd name") == "`odd name`"
    assert sql.quote("a`b") == "`a``b`"


def test_create_namespace() -> None:
    assert sql.create_namespace("local", "ds") == "CREATE NAMESPACE IF NOT EXISTS local.ds"


def test_column_definitions_quote_names_and_keep_types() -> None:
    columns = [("id", "int"), ("price", "decimal(10,2)"), ("when seen", "timestamp")]
    assert sql.column_definitions(columns) == "`id` int, `price` decimal(10,2), `when seen` timestamp"


def test_create_table_without_clauses() -> None:
    assert (
        sql.create_table(TABLE, "`id` int")
        == "CREATE TABLE IF NOT EXISTS local.ds.t (`id` int) USING iceberg"
    )


def test_create_table_with_partitions_and_properties_in_order() -> None:
    statement = sql.create_table(
        TABLE,
        "id INT, ts TIMESTAMP",
        partition_by=("days(ts)", "bucket(4, id)"),
        properties={"format-version": "2", "write.format.default": "parquet"},
    )
    assert statement == (
        "CREATE TABLE IF NOT EXISTS local.ds.t (id INT, ts TIMESTAMP) USING iceberg"
        " PARTITIONED BY (days(ts), bucket(4, id))"
        " TBLPROPERTIES ('format-version'='2', 'write.format.default'='parquet')"
    )


def test_table_properties_are_string_literals_whatever_they_hold() -> None:
    statement = sql.create_table(TABLE, "id INT", properties={"it's": "a 'quoted' \\ value; -- no"})
    assert statement.endswith(" TBLPROPERTIES ('it\\'s'='a \\'quoted\\' \\\\ value; -- no')")


def test_new_tables_trim_their_metadata_unless_load_json_says_otherwise() -> None:
    assert sql.table_properties({}) == {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "100",
    }
    chosen = sql.table_properties({"write.metadata.previous-versions-max": "5", "format-version": "2"})
    assert chosen["write.metadata.previous-versions-max"] == "5"
    assert chosen["write.metadata.delete-after-commit.enabled"] == "true"
    assert chosen["format-version"] == "2"


def test_alter_table_adds_and_widens_columns() -> None:
    assert sql.add_column(TABLE, ("note", "string")) == "ALTER TABLE local.ds.t ADD COLUMN `note` string"
    assert sql.widen_column(TABLE, ("id", "bigint")) == "ALTER TABLE local.ds.t ALTER COLUMN `id` TYPE bigint"


def test_merge_into_without_deletes_updates_and_inserts() -> None:
    statement = sql.merge_into(TABLE, "src", ["id", "region"], ["id", "region", "v"], None)
    assert statement == (
        "MERGE INTO local.ds.t t USING src s ON t.`id` <=> s.`id` AND t.`region` <=> s.`region` "
        "WHEN MATCHED THEN UPDATE SET t.`id` = s.`id`, t.`region` = s.`region`, t.`v` = s.`v` "
        "WHEN NOT MATCHED AND NOT false THEN INSERT (`id`, `region`, `v`) VALUES (s.`id`, s.`region`, s.`v`)"
    )


def test_merge_into_with_a_delete_column_deletes_first_and_never_inserts_a_deleted_row() -> None:
    statement = sql.merge_into(TABLE, "src", ["id"], ["id", "v"], "gone")
    deleted = "coalesce(s.`gone`, false)"
    assert statement == (
        "MERGE INTO local.ds.t t USING src s ON t.`id` <=> s.`id` "
        f"WHEN MATCHED AND {deleted} THEN DELETE "
        "WHEN MATCHED THEN UPDATE SET t.`id` = s.`id`, t.`v` = s.`v` "
        f"WHEN NOT MATCHED AND NOT {deleted} THEN INSERT (`id`, `v`) VALUES (s.`id`, s.`v`)"
    )
    assert statement.index("THEN DELETE") < statement.index("THEN UPDATE")  # the first match wins


@pytest.mark.parametrize(
    ("statement", "keyword"),
    [
        ("MERGE INTO t USING batch", "MERGE"),
        ("insert into t select * from batch", "INSERT"),
        ("  UPDATE t SET a = 1", "UPDATE"),
        ("-- remove the retracted rows\nDELETE FROM t WHERE a = 1", "DELETE"),
        ("/* a block\n comment */ INSERT INTO t SELECT 1", "INSERT"),
        ("SELECT 'DELETE' AS word FROM batch", "SELECT"),
        ("-- INSERT later\nSELECT * FROM batch", "SELECT"),
        ("WITH x AS (SELECT 1) SELECT * FROM x", "SELECT"),
        ("WITH x AS (SELECT 1) INSERT INTO t SELECT * FROM x", "INSERT"),
        ("WITH x (a, b) AS (SELECT 1, 2), y AS (SELECT (3)) MERGE INTO t USING x", "MERGE"),
        ("(SELECT 1) UNION (SELECT 2)", "("),
        ("drop table t", "DROP"),
        ("CALL local.system.expire_snapshots(table => 'ds.t')", "CALL"),
        ("INSERTED", "INSERTED"),
        ("-- nothing", None),
    ],
)
def test_the_leading_keyword_is_read_after_comments_and_common_table_expressions(
    statement: str, keyword: str | None
) -> None:
    assert sql.leading_keyword(statement) == keyword


def test_transform_fills_every_placeholder_and_drops_the_trailing_semicolon() -> None:
    text = "INSERT INTO ${table} SELECT '${catalog}.${dataset}.${table_name}', '${rel}', ${generation};\n"
    assert sql.transform(text, PLACES) == ("INSERT INTO local.ds.t SELECT 'local.ds.t', '2024/05/01', 7")


def test_transform_keeps_semicolons_inside_literals_and_comments() -> None:
    text = "SELECT 'a;b' AS x, c -- trailing; note\nFROM batch /* also; here */;"
    assert (
        sql.transform(text, PLACES) == "SELECT 'a;b' AS x, c -- trailing; note\nFROM batch /* also; here */"
    )


def test_transform_refuses_several_statements() -> None:
    with pytest.raises(BatchFailed, match=r"must hold one statement.*it holds several"):
        sql.transform("DELETE FROM ${table} WHERE a = 1; SELECT * FROM batch", PLACES)


@pytest.mark.parametrize("text", ["SELECT ${nope} FROM batch", "SELECT $ FROM batch"])
def test_transform_names_the_known_placeholders(text: str) -> None:
    with pytest.raises(BatchFailed) as caught:
        sql.transform(text, PLACES)
    message = str(caught.value)
    assert message.startswith("transform.sql has an unknown placeholder")
    assert message.endswith("known: ${table}, ${catalog}, ${dataset}, ${table_name}, ${rel}, ${generation}")


def test_without_literals_empties_strings_and_drops_comments() -> None:
    # 'it''s; here' is two literals side by side, as Spark reads it (a quote is escaped \').
    assert sql.without_literals("SELECT 'it''s; here' -- x;\n/* y; */ FROM t") == "SELECT ''''  \n  FROM t"
    assert sql.without_literals("SELECT 'a\\';' AS `b;c`, r'\\' ;") == "SELECT '' AS ``, '' ;"


def test_expire_snapshots_names_the_table_in_its_catalog_and_the_cutoff_in_utc() -> None:
    from datetime import datetime, timedelta, timezone

    cutoff = datetime(2026, 11, 23, 1, 30, tzinfo=timezone(timedelta(hours=1)))
    assert sql.expire_snapshots("local", "local.ds.t", cutoff, 1000) == (
        "CALL local.system.expire_snapshots(table => 'ds.t', "
        "older_than => TIMESTAMP '2026-11-23 00:30:00.000000+00:00', retain_last => 1000)"
    )
