"""gcs_ocn_bq_ingest's names are refused with their replacement, not only as unknown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from turnstile.config.load_config import LoadConfig
from turnstile.config.validation import explain
from turnstile.names.legacy import transform_names
from turnstile.ops.check_settings import check


def problems_of(document: dict[str, object]) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        LoadConfig.model_validate(document)
    return explain(caught.value)


def test_bigquery_load_keys_name_turnstiles_key() -> None:
    found = problems_of({"sourceFormat": "CSV", "fieldDelimiter": "|"})
    assert any("key 'sourceFormat' is not a known key" in p and 'use "format"' in p for p in found)
    assert any('"reader_options": {"delimiter": ...}' in p for p in found)


def test_the_originals_data_source_name_says_what_names_jobs_instead() -> None:
    [problem] = problems_of({"dataSourceName": "erp"})
    assert "gcs_ocn_bq_ingest's" in problem and "<JOB_PREFIX>-<dataset>-<table>-<hash>" in problem


def test_a_schema_as_bigquery_fields_says_it_is_spark_ddl() -> None:
    [problem] = problems_of({"schema": {"fields": [{"name": "id", "type": "INTEGER"}]}})
    assert problem.startswith("key 'schema': got {'fields'") and "Spark DDL" in problem


def test_a_legacy_environment_variable_names_its_replacement() -> None:
    environ = {"BQ_PROJECT": "p", "MAX_RETRIES_ON_BIGQUERY_ERROR": "5"}
    found = {p.variable: p for p in check(environ, unknown_are_problems=True)}
    assert "gcs_ocn_bq_ingest's" in found["BQ_PROJECT"].problem
    assert "GOOGLE_CLOUD_PROJECT" in found["BQ_PROJECT"].fix
    assert "job_retries" in found["MAX_RETRIES_ON_BIGQUERY_ERROR"].fix


def test_the_originals_transform_names_are_named_with_theirs() -> None:
    why = transform_names("INSERT {dest_dataset}.{dest_table} SELECT * FROM temp_ext")
    assert why is not None and "temp_ext, {dest_dataset}, {dest_table}:" in why and "${table}" in why
    assert transform_names("SELECT * FROM batch") is None


def test_a_partition_group_that_captures_the_dollar_reads_the_decorator_without_it() -> None:
    """gcs_ocn_bq_ingest's default regex, copied verbatim, puts the `$` in its partition group."""
    from turnstile.names.paths import parse_success

    regex = r"^(?P<dataset>\w+)/(?P<table>\w+)/?(?P<partition>\$[0-9]+)?/?(?P<batch>[\w\-]+)?/?"
    batch = parse_success("b", "ds/t/$2024050113/_SUCCESS", regex)
    assert batch.partition == "2024050113" and batch.rel == "$2024050113"
    assert batch == parse_success("b", "ds/t/$2024050113/_SUCCESS", None)


def test_the_originals_job_prefix_with_its_trailing_hyphen_makes_ids_with_one_hyphen() -> None:
    from turnstile.config.settings import Settings

    assert Settings.from_env({"JOB_PREFIX": "gcf-ingest-"}).job_prefix == "gcf-ingest"


def test_the_original_readmes_regex_with_required_groups_after_the_table_finds_its_state_objects() -> None:
    from turnstile.names.paths import parse_success, table_of_state_object

    regex = (
        r"(?:[\w\-_0-9]+)/(?P<dataset>[\w\-_0-9]+)/(?P<table>[\w\-_0-9]+)/region=(?P<batch>[\w]+)/"
        r"yyyy=(?P<yyyy>[0-9]{4})/mm=(?P<mm>[0-9]{2})/dd=(?P<dd>[0-9]{2})/hh=(?P<hh>[0-9]{2})/"
    )
    batch = parse_success("b", "edw/my_product/tx/region=US/yyyy=2020/mm=01/dd=02/hh=03/_SUCCESS", regex)
    assert (batch.table.prefix, batch.rel) == ("edw/my_product/tx", "region=US/yyyy=2020/mm=01/dd=02/hh=03")
    for state in ("_bqlock", "_BACKFILL", "_backlog/region=US/yyyy=2020/mm=01/dd=02/hh=03/_SUCCESS"):
        assert table_of_state_object("b", f"edw/my_product/tx/{state}", regex) == batch.table
