"""A batch whose files hold no columns: every file empty (zero bytes), with no `schema` to read
them by. Spark reads it as no rows of no columns.

It is a batch of no rows, as a header-only CSV is: an existing table (or one `table_schema`
creates) takes it as an empty commit in the table's columns, which records it as applied. With
`mode: overwrite` that empties the table (the batch's rows replace the table's); in the other modes
no row changes. Its mapping and transform.sql have no field to work on and do not run. Nothing can
create a table from it: that fails the batch, saying what to do.
"""

from __future__ import annotations

from turnstile.state.records import ManifestBatch

# Modes that write the batch's rows and change nothing else: for no rows, one empty append.
_NO_ROWS_ARE_AN_APPEND = frozenset({"append", "merge", "overwrite_partitions"})


def as_no_rows(batch: ManifestBatch) -> ManifestBatch:
    """`batch` as the job applies a batch without columns: no mapping, no transform.sql, and an
    append unless it overwrites the whole table."""
    load = batch.load
    mode = "append" if load.mode in _NO_ROWS_ARE_AN_APPEND else load.mode
    update = {"mode": mode, "mapping": (), "merge_keys": (), "merge_order_by": None, "delete_column": None}
    return batch.model_copy(
        update={"load": load.model_copy(update=update), "transform_sql": None, "transform_source": None}
    )


def no_table_from(table: str, folder_uri: str) -> str:
    """Why a batch without columns cannot create its table, and what to do (the job's error names
    the batch in front of it)."""
    return (
        f"its files in {folder_uri} hold no columns (they are empty), so there is nothing to create "
        f'{table} from; upload the batch\'s data (then its _SUCCESS again), or set "schema" (the '
        "files' columns) or \"table_schema\" (the table's) in its _config/load.json"
    )
