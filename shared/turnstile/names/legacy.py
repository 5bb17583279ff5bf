"""gcs_ocn_bq_ingest's names and what turnstile calls them (docs/MIGRATING.md): so that an
environment variable, a load.json key or a transform written for the original is refused with its
replacement rather than only as unknown."""

from __future__ import annotations

import re

ENVIRONMENT = {
    "BQ_PROJECT": "use GOOGLE_CLOUD_PROJECT (the project the Dataproc batches run in)",
    "BQ_STORAGE_PROJECT": "Iceberg tables have no project: set ICEBERG_CATALOG and ICEBERG_WAREHOUSE",
    "MAX_BATCH_BYTES": "none: a batch is always read and committed whole (max_bytes_per_job in load.json "
    "bounds what one job takes)",
    "WAIT_FOR_JOB_SECONDS": "none: a job's done signal wakes the subscriber",
    "FAIL_ON_ZERO_DML_ROWS_AFFECTED": "none: turnstile does not count the rows a DML transform changed; "
    "try the transform on the local stack first",
    "MAX_RETRIES_ON_BIGQUERY_ERROR": "use job_retries and job_retry_backoff_seconds in load.json",
    "USE_ERROR_REPORTING_API": "none: failures are logged with an `event` that terraform/ alerts on",
}

LOAD_KEYS = {
    "sourceFormat": 'use "format" (csv, json, parquet, orc, avro, text)',
    "fieldDelimiter": 'use "reader_options": {"delimiter": ...}',
    "quote": 'use "reader_options": {"quote": ...}',
    "encoding": 'use "reader_options": {"encoding": ...}',
    "nullMarker": 'use "reader_options": {"nullValue": ...}',
    "allowQuotedNewlines": 'use "reader_options": {"multiLine": true}',
    "skipLeadingRows": 'use "reader_options": {"header": true} (the default for csv)',
    "autodetect": "remove it: without a schema, columns are inferred",
    "maxBadRecords": 'use "max_bad_records"',
    "allowJaggedRows": 'use "jagged_rows"',
    "ignoreUnknownValues": 'use "ignore_unknown_values"',
    "writeDisposition": 'use "mode": append, overwrite or overwrite_partitions',
    "createDisposition": "remove it: the job creates the table on its first batch",
    "schemaUpdateOptions": 'use "schema_evolution": "add_columns"',
    "timePartitioning": 'use "partition_by" with Iceberg transforms, e.g. ["days(ts)"]',
    "rangePartitioning": 'use "partition_by" with Iceberg transforms, e.g. ["bucket(16, id)"]',
    "hivePartitioningOptions": 'use "nested": true',
    "destinationTable": "remove it: the table comes from the path's dataset and table",
    "labels": "set DATAPROC_LABELS for the deployment",
    "dataSourceName": "remove it: job ids are <JOB_PREFIX>-<dataset>-<table>-<hash>",
    "useAvroLogicalTypes": "remove it: Spark reads Avro logical types as their types",
    "clustering": "set an Iceberg sort order on the table once (ALTER TABLE ... WRITE ORDERED BY ...)",
}

SCHEMA_AS_FIELDS = (
    '"schema" is Spark DDL, not BigQuery\'s list of fields: write "id BIGINT, name STRING, ts TIMESTAMP"'
)

_TRANSFORM_NAMES = re.compile(r"\{dest_dataset\}|\{dest_table\}|\btemp_ext\b")


def transform_names(sql: str) -> str | None:
    """What a transform written for the original must say instead, when it uses the original's
    placeholders or its external table; None otherwise."""
    found = sorted(set(_TRANSFORM_NAMES.findall(sql)))
    if not found:
        return None
    return (
        f"it uses gcs_ocn_bq_ingest's {', '.join(found)}: write ${{table}} for "
        "{dest_dataset}.{dest_table} and read the view `batch` instead of temp_ext (docs/MIGRATING.md, "
        "Transforms)"
    )
