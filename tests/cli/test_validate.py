"""`turnstile validate`: every `_config/` file and batch path checked, nothing applied."""

from __future__ import annotations

import json
import sys

import pytest

from tests.cli.conftest import Run, World


def listing(world: World) -> list[tuple[str, int]]:
    return [(o.name, o.generation) for o in world.store.list_objects("")]


def test_a_clean_bucket(run: Run, world: World) -> None:
    world.store.write("_config/load.json", b'{"format": "csv"}')
    world.store.write("sales/orders/_config/load.json", b'{"mode": "merge", "merge_keys": ["id"]}')
    world.store.write("sales/orders/incremental/_config/ORDERME", b"")
    world.upload("incremental/2024/05/01/13")
    world.upload("historical/2023")
    before = listing(world)
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 0, result.output
    assert "checked 3 _config/ files and 2 batches" in result.stdout
    assert "no problems found" in result.stdout
    assert listing(world) == before  # nothing written, nothing claimed


def test_a_bad_key_names_its_file_and_the_batches_it_breaks(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"mode": "append", "max_bad_rows": 3}')
    world.upload("incremental/2024/05/01/13")
    world.store.write("web/clicks/2024/_SUCCESS", b"")  # not below the bad file: fine
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 1
    bad = f"gs://{world.store.bucket}/sales/orders/_config/load.json"
    lines = result.stdout.splitlines()
    assert "problems (2):" in lines
    at = lines.index(f"  {bad}")
    assert "key 'max_bad_rows' is not a known key" in lines[at + 1]
    assert "max_bad_records" in lines[at + 1]  # the known keys are listed
    batch = f"gs://{world.store.bucket}/sales/orders/incremental/2024/05/01/13/_SUCCESS"
    at = lines.index(f"  {batch}")
    assert (
        lines[at + 1].strip()
        == f"cannot be applied: its config cascade includes the invalid {bad} (see above)"
    )
    assert "web/clicks" not in result.stdout


def test_bad_paths(run: Run, world: World) -> None:
    world.store.write("sales/bad-name/2024/_SUCCESS", b"")
    world.store.write("sales/orders/incremental/2024/13/01/_SUCCESS", b"")
    world.store.write("sales/orders/incremental/2024/05/01/13/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}/sales", "--output", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    problems = {p["object"].rsplit(world.store.bucket + "/", 1)[1]: p["message"] for p in report["problems"]}
    assert set(problems) == {"sales/bad-name/2024/_SUCCESS", "sales/orders/incremental/2024/13/01/_SUCCESS"}
    assert "table name 'bad-name' is not allowed" in problems["sales/bad-name/2024/_SUCCESS"]
    assert "impossible date" in problems["sales/orders/incremental/2024/13/01/_SUCCESS"]
    assert report["batches"] == 3


def test_config_above_the_prefix_counts_and_merged_rules_apply_per_batch(run: Run, world: World) -> None:
    # A dataset-level merge without keys is fine when every table below adds its keys...
    world.store.write("sales/_config/load.json", b'{"mode": "merge"}')
    world.store.write("sales/orders/_config/load.json", b'{"merge_keys": ["id"]}')
    world.upload("incremental/2024/05/01/13")
    assert run("validate", f"gs://{world.store.bucket}/sales/orders").exit_code == 0
    # ...and a problem for the batch of a table that does not.
    world.store.write("sales/refunds/2024/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}/sales/refunds", "-o", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["object"].endswith("sales/refunds/2024/_SUCCESS")
    assert "mode 'merge' needs merge_keys" in problem["message"]
    # A bad file at the bucket root is checked even when validating below it.
    world.store.write("_config/load.json", b"{not json")
    result = run("validate", f"gs://{world.store.bucket}/sales/orders", "-o", "json")
    objects = [p["object"] for p in json.loads(result.stdout)["problems"]]
    assert f"gs://{world.store.bucket}/_config/load.json" in objects


def test_warnings_do_not_fail(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/load.yaml", b"mode: merge")
    world.store.write("sales/orders/_config/transform.sql", b"  \n")
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 0
    assert "warnings (2):" in result.stdout
    assert (
        "a _config/ folder is read for load.json, transform.sql, audit.sql and ORDERME only" in result.stdout
    )
    assert "transform.sql is empty" in result.stdout


def test_an_audit_sql_is_read_as_queries_and_one_that_writes_is_a_problem(run: Run, world: World) -> None:
    audit = "sales/orders/_config/audit.sql"
    world.store.write(
        audit, b"-- no key twice; ever\nSELECT id FROM ${staged} GROUP BY id HAVING count(*) > 1;\n"
    )
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 0, result.stdout
    assert [p for p in json.loads(result.stdout)["problems"] if p["object"].endswith(audit)] == []
    assert not [w for w in json.loads(result.stdout)["warnings"] if w["object"].endswith(audit)]
    world.store.write(audit, b"SELECT 1 FROM ${staged};\nDELETE FROM ${staged} WHERE id < 0")
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 1
    [problem] = [p for p in json.loads(result.stdout)["problems"] if p["object"].endswith(audit)]
    assert "audit.sql statement 2 is a DELETE statement; an audit is one SELECT" in problem["message"]


def test_many_batches_with_one_problem_are_summarised(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"format": "xlsx"}')
    for hour in range(15):
        world.store.write(f"sales/orders/incremental/2024/05/01/{hour:02d}/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 1
    assert "... and 5 more objects with: cannot be applied" in result.stdout
    assert (
        len(json.loads(run("validate", f"gs://{world.store.bucket}", "-o", "json").stdout)["problems"]) == 16
    )


def test_a_merge_without_keys_is_flagged_at_its_load_json_before_any_batch_arrives(
    run: Run, world: World
) -> None:
    bucket = world.store.bucket
    world.store.write("_config/load.json", b'{"mode": "merge"}')
    world.store.write("sales/orders/_config/load.json", b'{"format": "csv"}')
    world.store.write("sales/refunds/_config/load.json", b'{"merge_keys": ["id"]}')
    result = run("validate", f"gs://{bucket}", "-o", "json")
    assert result.exit_code == 1, result.output
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["object"] == f"gs://{bucket}/sales/orders/_config/load.json"
    assert problem["message"] == (
        f"the merged load.json for gs://{bucket}/sales/orders/ (from gs://{bucket}/_config/load.json, "
        f"gs://{bucket}/sales/orders/_config/load.json) is invalid: mode 'merge' needs merge_keys (the "
        "columns that identify a row); no load.json below this one completes it, so every batch below it "
        "would fail: add the missing key here (or in a load.json nearer the batches)"
    )
    # A batch below it is reported as broken by that file, not with the problem again.
    world.upload("incremental/2024/05/01/13")
    text = run("validate", f"gs://{bucket}/sales/orders").stdout
    assert f"cannot be applied: its config cascade includes the invalid gs://{bucket}/sales/orders/" in text
    # Fixed, the bucket is clean.
    world.store.write("sales/orders/_config/load.json", b'{"merge_keys": ["order_id"]}')
    assert run("validate", f"gs://{bucket}").exit_code == 0


def test_a_success_at_the_bucket_root_or_one_level_down_says_what_a_batch_path_looks_like(
    run: Run, world: World
) -> None:
    bucket = world.store.bucket
    world.store.write("_SUCCESS", b"")
    world.store.write("sales/_SUCCESS", b"")
    result = run("validate", f"gs://{bucket}", "-o", "json")
    assert result.exit_code == 1
    problems = {p["object"]: p["message"] for p in json.loads(result.stdout)["problems"]}
    layout = (
        "<dataset>/<table>/[historical|incremental/][$partition/|YYYY/MM/DD/HH/][batch/[folders/]]_SUCCESS"
    )
    assert problems[f"gs://{bucket}/_SUCCESS"] == (
        f"a _SUCCESS at the bucket root belongs to no table; a batch path must look like {layout}, or set "
        "DESTINATION_REGEX (or destinationRegex in _config/load.json) for another layout; move it into "
        "its batch folder"
    )
    one_down = problems[f"gs://{bucket}/sales/_SUCCESS"]
    assert "the batch folder 'sales/' does not match the destination regex" in one_down
    assert one_down.endswith(
        f"expected {layout}, or set DESTINATION_REGEX (or destinationRegex in _config/load.json) for "
        "another layout"
    )
    assert "path segments" not in " ".join(problems.values())


def test_a_batch_whose_data_is_only_in_sub_folders_names_them_and_the_option(run: Run, world: World) -> None:
    folder = "sales/orders/incremental/2024/05/01/13/"
    world.store.write(folder + "dt=2024-05-01/part-0.csv", b"id\n1\n")
    world.store.write(folder + "dt=2024-05-01/.part-0.csv.crc", b"x")
    world.store.write(folder + "dt=2024-05-02/part-0.csv", b"id\n2\n")
    world.store.write(folder + "_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["object"] == f"gs://{world.store.bucket}/{folder}_SUCCESS"
    assert "has no data files of its own" in problem["message"]
    assert "dt=2024-05-01/, dt=2024-05-02/" in problem["message"]
    assert 'Set "nested": true' in problem["message"]
    # With the option set, the same batch is fine.
    world.store.write("sales/orders/_config/load.json", b'{"nested": true}')
    assert run("validate", f"gs://{world.store.bucket}").exit_code == 0


def test_bq_transform_sql_is_accepted_and_both_names_in_one_folder_are_a_problem(
    run: Run, world: World
) -> None:
    world.store.write("sales/orders/_config/bq_transform.sql", b"SELECT * FROM batch")
    world.upload("incremental/2024/05/01/13")
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 0, result.output
    assert "warnings" not in result.stdout
    world.store.write("sales/orders/_config/transform.sql", b"SELECT id FROM batch")
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert "holds both transform.sql and bq_transform.sql" in problem["message"]


def test_a_transform_sql_that_cannot_run_on_any_batch_is_a_problem_of_that_file(
    run: Run, world: World
) -> None:
    transforms = {
        "sales/drop": b"-- clean up first\nDROP TABLE ${table}",
        "sales/two": b"DELETE FROM ${table} WHERE v = ';'; SELECT * FROM batch",
        "sales/open": b"SELECT * FROM batch WHERE v = 'it\\'s",
        "sales/merge": b"WITH b AS (SELECT * FROM batch) MERGE INTO ${table} t USING b ON t.id = b.id "
        b"WHEN MATCHED THEN DELETE",
        "sales/select": b"SELECT *, '${rel}' AS folder FROM batch -- DROP TABLE",
    }
    for table, text in transforms.items():
        world.store.write(f"{table}/_config/transform.sql", text)
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 1, result.output
    problems = {
        p["object"].rsplit(world.store.bucket + "/", 1)[1]: p["message"]
        for p in json.loads(result.stdout)["problems"]
    }
    assert problems == {
        "sales/drop/_config/transform.sql": (
            "transform.sql is a DROP statement; a transform.sql is one SELECT over the view `batch`, whose "
            "rows are written in the table's mode, or one MERGE/UPDATE/DELETE/INSERT that writes the table "
            "itself: rewrite it as one of these"
        ),
        "sales/two/_config/transform.sql": (
            "transform.sql must hold one statement (a SELECT over `batch`, or one "
            "MERGE/UPDATE/DELETE/INSERT); it holds several"
        ),
        "sales/open/_config/transform.sql": (
            "transform.sql has a literal opened with ' on line 1 and never closed; close it"
        ),
    }


# -- mapping -----------------------------------------------------------------------------------------
def mapping_problems(run: Run, world: World) -> dict[str, list[str]]:
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    found: dict[str, list[str]] = {}
    for p in json.loads(result.stdout)["problems"]:
        found.setdefault(p["object"].rsplit(world.store.bucket + "/", 1)[1], []).append(p["message"])
    assert (result.exit_code == 1) == bool(found), result.output
    return found


def test_a_mapping_is_checked_against_a_sample_of_each_batch(run: Run, world: World) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        json.dumps(
            {
                "format": "json",
                "mapping": [
                    {"rename": "payload.user.id", "to": "user_id"},
                    {"cast": "payload.user.id", "type": "int"},  # moved away by the entry before
                    {"remove": "payload.debug"},
                    {"from_path": "time", "to": "hour"},
                ],
            }
        ).encode(),
    )
    good = "sales/orders/2024/05/01/13/"
    world.store.write(f"{good}part-0.json", b'{"payload": {"user": {"id": 1}, "debug": 1}}\n')
    world.store.write(f"{good}_SUCCESS", b"")
    # A later line has a field the first lines lack: the sample is the union of its lines.
    odd = "sales/orders/b7/"
    world.store.write(
        f"{odd}part-0.json", b'{"payload": {"user": {"id": 1}}}\nnot json\n{"payload": {"debug": 2}}\n'
    )
    world.store.write(f"{odd}_SUCCESS", b"")
    found = mapping_problems(run, world)
    fix = "fix the entry or an entry before it, or the data"
    sample = f"(the batch's fields from a sample of gs://{world.store.bucket}/"
    assert found == {
        f"{good}_SUCCESS": [
            "mapping[1] (cast 'payload.user.id'): field 'payload' has no field 'user' (it has: debug); "
            f"{fix} {sample}{good}part-0.json)"
        ],
        f"{odd}_SUCCESS": [
            "mapping[1] (cast 'payload.user.id'): field 'payload' has no field 'user' (it has: debug); "
            f"{fix} {sample}{odd}part-0.json)",
            "mapping[3] (from_path 'time'): the batch's path 'b7' names no time (YYYY/MM/DD/HH folders, a "
            "$YYYYMMDDHH partition, or yyyy/mm/dd/hh groups of the destination regex); use "
            '{"from_path": "regex"} for another layout',
        ],
    }
    # Fixed: the cast names the field where the rename put it.
    world.store.write(
        "sales/orders/_config/load.json",
        json.dumps(
            {
                "format": "json",
                "mapping": [
                    {"rename": "payload.user.id", "to": "user_id"},
                    {"cast": "user_id", "type": "int"},
                    {"remove": "payload.debug"},
                    {"from_path": "regex", "regex": "(?P<b>[^/]+)$", "group": "b", "to": "part"},
                ],
            }
        ).encode(),
    )
    assert mapping_problems(run, world) == {}


def test_a_mapping_is_checked_against_the_schema_and_table_schema_given(run: Run, world: World) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        json.dumps(
            {
                "schema": "id INT, v STRING, extra STRING",
                "table_schema": "id INT, value STRING",
                "mapping": [
                    {"rename": "V", "to": "value"},
                    {"cast": "ID", "type": "bigint"},
                    {"remove": "w"},
                ],
            }
        ).encode(),
    )
    world.upload("2024/05/01/13")
    # Its header names the schema's columns: the fields come from `schema` all the same.
    world.store.write("sales/orders/2024/05/01/13/part-0.csv", b"id,v,extra\n1,a,b\n")
    name = "sales/orders/2024/05/01/13/_SUCCESS"
    assert mapping_problems(run, world) == {
        name: [
            "mapping[2] (remove 'w'): the batch has no field 'w' (it has: id, extra, value); fix the entry "
            "or an entry before it, or the data (the batch's fields from `schema` in load.json)",
            "the mapped batch has column(s) 'extra' that table_schema does not; add them to table_schema, "
            'remove them in the mapping, or set "schema_evolution": "add_columns"',
        ]
    }


def test_a_csv_sample_gives_the_header_as_fields(run: Run, world: World) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        b'{"reader_options": {"delimiter": ";"}, "mapping": [{"cast": "amount", "type": "int"}]}',
    )
    world.store.write("sales/orders/b1/part-0.csv", b"id;amount\n1;2\n")
    world.store.write("sales/orders/b1/_SUCCESS", b"")
    assert mapping_problems(run, world) == {}
    world.store.write("sales/orders/b2/part-0.csv", b"id;total\n1;2\n")
    world.store.write("sales/orders/b2/_SUCCESS", b"")
    [problem] = mapping_problems(run, world)["sales/orders/b2/_SUCCESS"]
    assert problem.startswith(
        "mapping[0] (cast 'amount'): the batch has no field 'amount' (it has: id, total)"
    )


def test_bad_mapping_entries_are_named_in_their_load_json(run: Run, world: World) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        json.dumps(
            {
                "mapping": [
                    {"cast": "a", "type": "money"},
                    {"from_path": "regex", "regex": "([0-9]+", "group": "n", "to": "n"},
                ]
            }
        ).encode(),
    )
    world.store.write(
        "sales/refunds/_config/load.json",
        b'{"mapping": [{"constant": "x", "value": 1}, {"rename": "y", "to": "x"}]}',
    )
    world.store.write(
        "sales/fees/_config/load.json", b'{"mapping": [{"default": "n", "value": "abc", "type": "int"}]}'
    )
    found = mapping_problems(run, world)
    [fees] = found["sales/fees/_config/load.json"]
    assert "default 'n': value 'abc' is not a int (write a whole number)" in fees
    [orders] = found["sales/orders/_config/load.json"]
    assert "key 'mapping[0].cast.type': got 'money'; unknown type 'money'" in orders
    assert "key 'mapping[1].from_path': got " in orders and "does not compile" in orders
    [refunds] = found["sales/refunds/_config/load.json"]
    assert (
        "mapping[1] (rename 'y') writes column 'x', which mapping[0] (constant 'x') already writes" in refunds
    )


def test_a_nested_sample_has_its_partition_folders_as_fields(run: Run, world: World) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        b'{"format": "json", "nested": true, "mapping": [{"cast": "dt", "type": "date"}, {"remove": "x"}]}',
    )
    world.store.write("sales/orders/b1/dt=2024-05-01/part-0.json", b'{"id": 1}\n')
    world.store.write("sales/orders/b1/_SUCCESS", b"")
    [problem] = mapping_problems(run, world)["sales/orders/b1/_SUCCESS"]
    assert problem.startswith("mapping[1] (remove 'x'): the batch has no field 'x' (it has: id, dt)")


def test_dependencies_on_unknown_tables_cycles_and_bad_durations_name_the_file_and_key(
    run: Run, world: World
) -> None:
    bucket = world.store.bucket
    world.store.write("ds/a/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.c"]}')
    world.store.write("ds/b/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.a"]}')
    world.store.write("ds/c/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.b"]}')
    world.store.write("ds/fact/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.nope"]}')
    world.store.write("ds/late/_config/load.json", b'{"natural_time": "hourly", "delay": "15 minutes"}')
    world.store.write("ds/ok/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.a"]}')
    world.store.write("ds/plain/_config/load.json", b'{"format": "json"}')
    world.store.write(
        "ds/on_plain/_config/load.json", b'{"natural_time": "daily", "depends_on": ["ds.plain"]}'
    )
    world.store.write("ds/_config/ORDERME", b"")  # only ordered tables wait
    result = run("validate", f"gs://{bucket}", "--output", "json")
    assert result.exit_code == 1
    problems = {
        p["object"].rsplit(bucket + "/", 1)[1]: p["message"] for p in json.loads(result.stdout)["problems"]
    }
    assert "table 'ds/nope' has no objects in the bucket" in problems["ds/fact/_config/load.json"]
    assert "depends_on: a dependency cycle ds/a -> ds/c -> ds/b -> ds/a" in problems["ds/a/_config/load.json"]
    assert "dependency cycle" in problems["ds/b/_config/load.json"]
    assert "delay" in problems["ds/late/_config/load.json"] and "15m" in problems["ds/late/_config/load.json"]
    assert "ds/ok/_config/load.json" not in problems  # waits for a cycle, but closes none itself
    assert "table 'ds/plain' has no natural_time" in problems["ds/on_plain/_config/load.json"]


def test_a_batch_naming_no_period_of_its_tables_natural_time_is_a_warning(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"natural_time": "hourly"}')
    world.upload("incremental/2024/05/01")  # a day folder under an hourly natural time
    world.upload("incremental/2024/05/01/13")
    result = run("validate", f"gs://{world.store.bucket}", "--output", "json")
    assert result.exit_code == 0, result.output
    warnings = {
        w["object"].rsplit("/orders/", 1)[1]: w["message"] for w in json.loads(result.stdout)["warnings"]
    }
    assert set(warnings) == {"incremental/2024/05/01/_SUCCESS"}
    assert "names no period for the table's natural_time" in warnings["incremental/2024/05/01/_SUCCESS"]


def test_a_batch_finer_than_its_tables_natural_time_is_a_warning(run: Run, world: World) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"natural_time": "hourly"}')
    world.upload("incremental/2024/05/01/13/15")  # a quarter hour under an hourly natural time
    world.upload("incremental/2024/05/01/14")
    result = run("validate", f"gs://{world.store.bucket}", "--output", "json")
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert warning["object"].endswith("/orders/incremental/2024/05/01/13/15/_SUCCESS")
    assert (
        "is finer than the table's natural_time (it goes on below the period 2024-05-01T13:00"
        in (warning["message"])
    )
    assert "moves the watermark only to the period's start" in warning["message"]


def test_a_schema_spark_would_refuse_and_a_value_of_the_wrong_type_name_the_file_and_key(
    run: Run, world: World
) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        b'{"schema": "id BIGINTT, item STRING", "partition_by": ["dayz(ts)"], "nested": "yes"}',
    )
    world.upload("2024/05/01/13")
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 1
    bad = f"gs://{world.store.bucket}/sales/orders/_config/load.json"
    text = result.stdout
    assert f"  {bad}" in text.splitlines()
    assert "key 'schema': got 'id BIGINTT, item STRING'; column 'id': 'BIGINTT' is not a Spark type" in text
    assert "key 'partition_by': got ['dayz(ts)']; 'dayz(ts)' is not a partition of Iceberg's" in text
    assert "key 'nested': got 'yes'; Input should be a valid boolean" in text
    assert "sales/orders/2024/05/01/13/_SUCCESS" in text  # the batch it breaks


def test_a_csv_header_that_does_not_name_the_schemas_columns_in_order_is_a_problem(
    run: Run, world: World
) -> None:
    world.store.write("sales/orders/_config/load.json", b'{"schema": "id BIGINT, item STRING, qty INT"}')
    for rel, header in (("b1", "ID,Item,Qty"), ("b2", "id,qty,item")):
        world.store.write(f"sales/orders/{rel}/part-0.csv", f"{header}\n1,2,3\n".encode())
        world.store.write(f"sales/orders/{rel}/_SUCCESS", b"")
    assert mapping_problems(run, world) == {
        "sales/orders/b2/_SUCCESS": [
            f"the header of gs://{world.store.bucket}/sales/orders/b2/part-0.csv names id, qty, item where "
            "`schema` in load.json has id, item, qty: the batch would fail; fix the header or the schema, "
            "or set reader_options.enforceSchema to true to map columns by position"
        ]
    }
    world.store.write(
        "sales/orders/_config/load.json",
        b'{"schema": "id BIGINT, item STRING, qty INT", "reader_options": {"enforceSchema": true}}',
    )
    assert mapping_problems(run, world) == {}  # by position, as asked


def test_a_batch_at_the_root_of_an_ordered_table_with_batch_folders_is_a_problem(
    run: Run, world: World
) -> None:
    world.store.write("sales/orders/_config/ORDERME", b"")
    world.store.write("sales/orders/part-0.csv", b"id\n1\n")
    world.store.write("sales/orders/_SUCCESS", b"")
    assert mapping_problems(run, world) == {}  # a flat table: every batch at its root, in turn
    world.upload("2024/05/01/13")
    [problem] = mapping_problems(run, world)["sales/orders/_SUCCESS"]
    assert "is a batch at the root of ordered table sales.orders, whose batches sit in folders" in problem
    assert "('2024/05/01/13')" in problem


def test_a_reader_option_spark_does_not_know_is_a_warning_with_the_likely_name(
    run: Run, world: World
) -> None:
    world.store.write(
        "sales/orders/_config/load.json", b'{"reader_options": {"delimter": ";", "header": true}}'
    )
    result = run("validate", f"gs://{world.store.bucket}")
    assert result.exit_code == 0  # a warning: Spark may know options this list does not
    assert "warnings (1):" in result.stdout
    assert "reader_options 'delimter' is no option of Spark's file readers (did you mean 'delimiter'?)" in (
        " ".join(result.stdout.split())
    )


def test_dependencies_that_could_never_be_met_are_problems_of_the_load_json_that_declares_them(
    run: Run, world: World
) -> None:
    bucket = world.store.bucket
    # A dataset-level depends_on applies to ds/src too: it would wait for itself.
    world.store.write("ds/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ds.src"]}')
    world.store.write("ds/_config/ORDERME", b"")
    for table in ("ds/src", "ds/other"):
        world.store.write(f"{table}/2026/01/01/00/part-0.csv", b"id\n1\n")
        world.store.write(f"{table}/2026/01/01/00/_SUCCESS", b"")
    # An ordered table waiting for an unordered one (no watermark), and an unordered one that waits.
    world.store.write("ln/usrc/_config/load.json", b'{"natural_time": "hourly"}')
    world.store.write("ln/udep/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ln.usrc"]}')
    world.store.write("ln/udep/_config/ORDERME", b"")
    world.store.write("ln/unord/_config/load.json", b'{"natural_time": "hourly", "delay": "1h"}')
    # A typo'd source that a waiting table already registered with (only `_turnstile/dependents/`).
    world.store.write("ln/never/_config/load.json", b'{"natural_time": "hourly", "depends_on": ["ln.ghost"]}')
    world.store.write("ln/never/_config/ORDERME", b"")
    world.store.write("ln/ghost/_turnstile/dependents/ln~never.json", b'{"table": "ln/never"}')
    result = run("validate", f"gs://{bucket}", "--output", "json")
    assert result.exit_code == 1
    problems: dict[str, list[str]] = {}
    for p in json.loads(result.stdout)["problems"]:
        problems.setdefault(p["object"].rsplit(bucket + "/", 1)[1], []).append(p["message"])
    [itself] = problems["ds/_config/load.json"]
    assert "table 'ds/src' would wait for itself for ever" in itself
    [unordered_source] = problems["ln/udep/_config/load.json"]
    assert (
        "table 'ln/usrc' is not ordered (no ORDERME on its path), so it has no watermark" in unordered_source
    )
    [waits_unordered] = problems["ln/unord/_config/load.json"]
    assert (
        "table 'ln/unord' is not ordered" in waits_unordered and "only ordered tables wait" in waits_unordered
    )
    [ghost] = problems["ln/never/_config/load.json"]  # once, and for what it is
    assert "table 'ln/ghost' has no objects in the bucket" in ghost


def test_a_data_file_whose_name_spark_cannot_read_is_a_problem_naming_it(run: Run, world: World) -> None:
    folder = "sales/orders/incremental/2024/05/01/13/"
    world.store.write(folder + "part[0].csv", b"id\n1\n")  # glob characters: read as themselves
    colon = world.store.write(folder + "part-10:00.csv", b"id\n2\n")
    world.store.write(folder + "_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["object"] == f"gs://{world.store.bucket}/{folder}_SUCCESS"
    assert problem["message"].startswith(
        f"Spark cannot read the object gs://{world.store.bucket}/{folder}part-10:00.csv by its name"
    )
    assert "rename the file without ':', then upload the batch's _SUCCESS again" in problem["message"]
    world.store.delete(folder + "part-10:00.csv", if_generation=colon)
    assert run("validate", f"gs://{world.store.bucket}").exit_code == 0


def test_parquet_files_under_the_default_csv_format_are_a_problem(run: Run, world: World) -> None:
    world.store.write("sales/orders/2024/05/01/13/part-0.parquet", b"PAR1")
    world.store.write("sales/orders/2024/05/01/13/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}/sales/orders", "--output", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["object"].endswith("2024/05/01/13/_SUCCESS")
    assert "its files are parquet" in problem["message"] and '"format": "parquet"' in problem["message"]


def test_merge_keys_and_time_column_the_mapping_renames_or_removes_are_problems(
    run: Run, world: World
) -> None:
    world.store.write(
        "sales/orders/_config/load.json",
        json.dumps(
            {
                "mode": "merge",
                "merge_keys": ["key"],
                "time_column": "when",
                "mapping": [{"rename": "key", "to": "k"}, {"remove": "when"}],
            }
        ).encode(),
    )
    world.store.write("sales/orders/b1/part-0.csv", b"key,when,v\n1,2024-05-01,a\n")
    world.store.write("sales/orders/b1/_SUCCESS", b"")
    problems = mapping_problems(run, world)["sales/orders/b1/_SUCCESS"]
    assert [p.split(",")[0] for p in problems] == [
        "merge_keys names 'key'",
        "time_column names 'when'",
    ]
    assert all("which the mapped batch does not have" in p for p in problems)
    # Naming the mapped column is right.
    world.store.write(
        "sales/orders/_config/load.json",
        b'{"mode": "merge", "merge_keys": ["k"], "mapping": [{"rename": "key", "to": "k"}]}',
    )
    assert mapping_problems(run, world) == {}


def test_a_derived_table_without_a_select_transform_is_a_problem_of_its_load_json(
    run: Run, world: World
) -> None:
    bucket = world.store.bucket
    world.store.write("src/a/_config/load.json", b'{"natural_time": "hourly"}')
    world.store.write("src/a/_config/ORDERME", b"")
    world.store.write("src/a/2026/01/01/00/part-0.csv", b"id\n1\n")
    world.store.write("src/a/2026/01/01/00/_SUCCESS", b"")
    derived = b'{"derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"}, "depends_on": ["src.a"]}'
    world.store.write("mart/none/_config/load.json", derived)
    world.store.write("mart/merge/_config/load.json", derived)
    world.store.write("mart/merge/_config/transform.sql", b"-- upsert\nMERGE INTO t USING s ON t.id = s.id")
    world.store.write("mart/with/_config/load.json", derived)
    world.store.write(
        "mart/with/_config/transform.sql", b"WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a"
    )
    world.store.write("mart/good/_config/load.json", derived)
    world.store.write("mart/good/_config/transform.sql", b"SELECT * FROM ${catalog}.src.a")
    result = run("validate", f"gs://{bucket}", "--output", "json")
    assert result.exit_code == 1, result.output
    problems: dict[str, list[str]] = {}
    for p in json.loads(result.stdout)["problems"]:
        problems.setdefault(p["object"].rsplit(bucket + "/", 1)[1], []).append(p["message"])
    [none] = problems["mart/none/_config/load.json"]
    assert "derived table 'mart/none' has no transform.sql" in none
    [merge] = problems["mart/merge/_config/load.json"]
    assert "its transform.sql is a MERGE statement, not a SELECT" in merge
    [with_insert] = problems["mart/with/_config/load.json"]
    assert "its transform.sql is an INSERT statement, not a SELECT" in with_insert
    assert "mart/good/_config/load.json" not in problems


def test_overwrite_partitions_without_partition_by_is_a_warning_on_its_load_json(
    run: Run, world: World
) -> None:
    world.store.write("sales/_config/load.json", b'{"mode": "overwrite_partitions"}')
    world.store.write("sales/orders/_config/load.json", b'{"schema": "id BIGINT"}')
    world.upload("$20240501")
    world.upload("$20240502")
    world.store.write("sales/daily/_config/load.json", b'{"partition_by": ["day"]}')
    world.store.write("sales/daily/$20240501/part-0.csv", b"id\n1\n")
    world.store.write("sales/daily/$20240501/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}", "--output", "json")
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]  # once for the table, none for sales/daily
    assert warning["object"] == f"gs://{world.store.bucket}/sales/orders/_config/load.json"
    assert "mode overwrite_partitions without partition_by" in warning["message"]
    assert "replace the whole table" in warning["message"]


def test_files_named_like_data_that_an_underscore_keeps_out_of_the_batch_are_a_warning(
    run: Run, world: World
) -> None:
    world.store.write("raw/clicks/b1/part-0.csv", b"id\n1\n")
    world.store.write("raw/clicks/b1/_part-1.csv", b"id\n2\n")
    world.store.write("raw/clicks/b1/.part-0.csv.crc", b"x")  # a checksum: not named like data
    world.store.write("raw/clicks/b1/_committed_123", b"{}")  # a marker
    world.store.write("raw/clicks/b1/_SUCCESS", b"")
    result = run("validate", f"gs://{world.store.bucket}", "-o", "json")
    assert result.exit_code == 0, result.output
    [warning] = json.loads(result.stdout)["warnings"]
    assert warning["object"].endswith("raw/clicks/b1/_SUCCESS")
    assert warning["message"].startswith("1 file(s) named like data are not read")
    assert warning["message"].count("gs://") == 1 and "raw/clicks/b1/_part-1.csv" in warning["message"]


def test_without_spark_the_expectations_are_left_to_the_job_and_a_warning_says_so(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As where turnstile is installed without pyspark: importing it fails.
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    load = {"expectations": [{"name": "positive", "check": "amount >= 0", "on_fail": "warn"}]}
    world.store.write("sales/orders/_config/load.json", json.dumps(load).encode())
    world.upload("incremental/2024/05/01/13")
    result = run("validate", f"gs://{world.store.bucket}", "--output", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["problems"] == []
    (warning,) = report["warnings"]
    assert warning["object"] == f"gs://{world.store.bucket}/"
    assert warning["message"].startswith("the expectations' checks were not parsed: Spark did not start here")
    assert "install turnstile[job]" in warning["message"]


def test_a_table_without_expectations_never_starts_spark(
    run: Run, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    world.store.write("sales/orders/_config/load.json", b'{"format": "csv"}')
    world.upload("incremental/2024/05/01/13")
    result = run("validate", f"gs://{world.store.bucket}", "--output", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["warnings"] == []
