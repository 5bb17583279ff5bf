"""`turnstile validate`: every `_config/` file and every batch path under a prefix, against the
rules the functions apply, with nothing applied or written.

- each `_config/load.json` alone (the rule a function applies when it reads that file: JSON object,
  known keys, allowed values), including those above the prefix, which apply to its batches too;
- each `_config/load.json` under the prefix with no load.json below it: the cascade merged down to
  it (rules across keys and files, e.g. `mode: merge` needs `merge_keys`), so such a mistake shows
  before any batch arrives;
- each `_SUCCESS` batch: its merged config cascade (`ConfigReader.resolve`: rules across keys and
  files), its path (`parse_success` with the destination regex the cascade selects), and whether
  its data sits only in sub-folders its `nested` option does not read, whether Spark can read each
  of its data files by its name (`batchfiles.unreadable_files`), and its `mapping`
  (`ops.validate_mapping`: over `schema` or a sample of the batch, its path and `table_schema`);
- each `depends_on`: the tables it names exist, and no dependency cycle closes
  (`ops.validate_lineage`);
- warnings, which do not fail: files in `_config/` that turnstile ignores, an empty transform.sql, a
  `reader_options` key no Spark file reader knows (`turnstile.config.reader_options`), a batch whose path
  names no period of its table's `natural_time`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from turnstile.config import reader_options
from turnstile.config.cascade import (
    AUDIT_SQL,
    BQ_TRANSFORM_SQL,
    LOAD_JSON,
    ORDERME,
    TRANSFORM_SQL,
    ConfigReader,
    levels,
    refused_config_file,
)
from turnstile.config.cascade import (
    _parse_load_json as check_load_json,  # the per-file rule itself, not a copy
)
from turnstile.config.load_config import LoadConfig
from turnstile.config.settings import Settings
from turnstile.core.errors import ConfigError, PathError
from turnstile.names.batchfiles import (
    data_files,
    data_sub_folders,
    format_mismatch,
    no_data_files,
    unread_data_like,
    unread_sub_folders,
    unreadable_files,
)
from turnstile.names.paths import CONFIG, Batch, ObjectKind, classify, parse_success
from turnstile.ops import validate_expectations, validate_mapping, validate_sql
from turnstile.ops.validate_lineage import dependency_problems, natural_time_warning
from turnstile.protocol import publisher
from turnstile.spark import sql
from turnstile.store.port import ListedObject, ObjectStore, object_uri


@dataclass(frozen=True)
class Problem:
    object: str  # gs:// URI of the object at fault (or of the batch it makes unusable)
    message: str


@dataclass
class Report:
    configs: int = 0
    batches: int = 0
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)


def objects_to_check(store: ObjectStore, prefix: str) -> list[ListedObject]:
    """Everything under the prefix, plus the `_config/` files of the levels above it."""
    folder = _folder(prefix)
    above = [level for level in levels(folder) if level != folder]
    found = [info for level in above for info in store.list_entries(f"{level}{CONFIG}/")]
    return found + store.list_entries(folder)


def validate(
    store: ObjectStore,
    settings: Settings,
    objects: list[ListedObject],
    advance: Callable[[], None] = lambda: None,
    prefix: str = "",
    *,
    checker: validate_expectations.Checker | None = None,
) -> Report:
    """`checker` judges the expectations' checks (default: a local Spark session, started only
    when a load.json has expectations)."""
    report = Report()
    checker = checker or validate_expectations.SparkChecker()
    bucket = store.bucket
    configs = ConfigReader(store)
    bad_load_json: dict[str, str] = {}  # object name -> its problem
    successes: list[str] = []
    for info in objects:
        kind = classify(info.name, settings.success_filename, settings.start_backfill_filename)
        if kind is ObjectKind.CONFIG:
            report.configs += 1
            problem = _check_config(store, info.name, checker)
            if problem is not None:
                warning, message = problem
                (report.warnings if warning else report.problems).append(
                    Problem(object_uri(store, info.name), message)
                )
                if not warning:
                    bad_load_json[info.name] = message
            advance()
        elif kind is ObjectKind.SUCCESS:
            successes.append(info.name)
        else:
            advance()
    load_jsons = [
        info.name
        for info in objects
        # Those above the prefix may leave a key to files outside it: only their batches tell.
        if info.name.endswith(f"/{CONFIG}/{LOAD_JSON}") or info.name == f"{CONFIG}/{LOAD_JSON}"
        if info.name.startswith(_folder(prefix))
    ]
    for name, message in _incomplete_cascades(configs, load_jsons, bad_load_json):
        report.problems.append(Problem(object_uri(store, name), message))
        bad_load_json[name] = message
    for name, message in dependency_problems(
        store,
        configs,
        [n for n in load_jsons if n not in bad_load_json],
        _tables_of(configs, bucket, successes, settings.destination_regex),
        order_per_table=settings.order_per_table,
    ):
        report.problems.append(Problem(object_uri(store, name), message))
    names = sorted(info.name for info in objects)
    sizes = {info.name: info.size for info in objects}
    warned: set[tuple[str, ...]] = set()  # config cascades already reported, each once
    for name in successes:  # after every load.json is known: a bad one is reported once, by name
        report.batches += 1
        found = _check_batch(
            store,
            settings,
            configs,
            name,
            bad_load_json=bad_load_json,
            names=names,
            sizes=sizes,
            checker=checker,
        )
        report.problems += [Problem(object_uri(store, name), message) for message in found]
        if not found and (untimed := natural_time_warning(configs, bucket, name, settings.destination_regex)):
            report.warnings.append(Problem(object_uri(store, name), untimed))
        if not found and (unread := _unread_data_like(store, name, names)):
            report.warnings.append(Problem(object_uri(store, name), unread))
        if not found and (whole := _whole_table_overwrite(configs, name, warned)):
            report.warnings.append(Problem(object_uri(store, whole[0]), whole[1]))
        advance()
    if checker.unavailable:
        report.warnings.append(Problem(object_uri(store, _folder(prefix)), checker.unavailable))
    return report


def _tables_of(configs: ConfigReader, bucket: str, successes: list[str], regex: str | None) -> set[str]:
    """The table folders the batches name (a batch whose config or path is bad names none here:
    it is reported on its own)."""
    found = set()
    for name in successes:
        try:
            resolved = configs.resolve(name.rpartition("/")[0] + "/")
            found.add(parse_success(bucket, name, resolved.load.destination_regex or regex).table.prefix)
        except (ConfigError, PathError):
            continue
    return found


def _check_config(
    store: ObjectStore, name: str, checker: validate_expectations.Checker
) -> tuple[bool, str] | None:
    """(is_warning, message) for a `_config/` object, None when it is fine."""
    base = name.partition(f"{CONFIG}/")[2]
    if (refused := refused_config_file(base)) is not None:
        return False, refused
    if "/" in base or base not in (LOAD_JSON, TRANSFORM_SQL, BQ_TRANSFORM_SQL, AUDIT_SQL, ORDERME):
        return True, (
            f"ignored: a _config/ folder is read for {LOAD_JSON}, {TRANSFORM_SQL}, {AUDIT_SQL} and "
            f"{ORDERME} only "
            f"({BQ_TRANSFORM_SQL} counts as {TRANSFORM_SQL}); "
            "rename or remove it"
        )
    if base == ORDERME:
        return None
    found = store.read(name)
    if found is None:
        return None  # deleted since listed
    if base in (TRANSFORM_SQL, BQ_TRANSFORM_SQL):
        if not found.data.strip():
            return True, f"{base} is empty; write the SQL over the view `batch`, or remove it"
        return _transform_problem(base, found.text())
    if base == AUDIT_SQL:
        return validate_sql.audit_problem(found.text())
    try:
        load = check_load_json(object_uri(store, name), found.data)
    except ConfigError as exc:
        return False, _without_uri(str(exc), store, name)
    if unparsed := validate_expectations.config_problems(load.get("expectations"), checker):
        return False, "; ".join(unparsed)
    misspelt = reader_options.unknown(load.get("reader_options") or {})
    return (True, "; ".join(misspelt)) if misspelt else None


def _transform_problem(base: str, text: str) -> tuple[bool, str] | None:
    """What keeps a transform.sql from running on any batch, read without Spark: a literal left
    open, the original tool's names, several statements, or a statement that opens as neither a
    query nor a MERGE/UPDATE/DELETE/INSERT (the job asks Spark's parser, which has the last word)."""
    if (problem := sql.transform_problem(text)) is not None:
        return False, f"{base} {problem}"
    keyword = sql.leading_keyword(text)
    if keyword is not None and keyword not in sql.QUERY_KEYWORDS | sql.DML_KEYWORDS:
        return False, (
            f"{base} is {sql.a_statement(keyword)}; a transform.sql is one SELECT over the view `batch`, "
            "whose rows are written in the table's mode, or one MERGE/UPDATE/DELETE/INSERT that "
            "writes the table itself: rewrite it as one of these"
        )
    return None


def _folder(prefix: str) -> str:
    return f"{prefix.strip('/')}/" if prefix.strip("/") else ""


def _incomplete_cascades(
    configs: ConfigReader, load_jsons: list[str], bad_load_json: dict[str, str]
) -> list[tuple[str, str]]:
    """(load.json, problem) for each file, valid alone and with no load.json below it, whose
    cascade merged down to it breaks a rule across keys (`mode: merge` and no `merge_keys`...):
    every batch below it would fail. A file with one below it may leave a key to the nearer one."""
    found = []
    for name in load_jsons:
        level = name.removesuffix(f"{CONFIG}/{LOAD_JSON}")
        broken_above = any(f"{up}{CONFIG}/{LOAD_JSON}" in bad_load_json for up in levels(level))
        if broken_above or any(o != name and o.startswith(level) for o in load_jsons):
            continue  # reported as it is / may be completed below
        try:
            configs.resolve(level)
        except ConfigError as exc:
            found.append(
                (
                    name,
                    f"{exc}; no load.json below this one completes it, so every batch below it would "
                    "fail: add the missing key here (or in a load.json nearer the batches)",
                )
            )
    return found


def _unread_data_like(store: ObjectStore, success: str, names: list[str]) -> str | None:
    folder = success.rpartition("/")[0] + "/"
    unread = unread_data_like(folder, names)
    if not unread:
        return None
    files = ", ".join(object_uri(store, n) for n in unread[:5]) + (" ..." if len(unread) > 5 else "")
    return (
        f"{len(unread)} file(s) named like data are not read: a name starting with '_' or '.' is never "
        f"a batch's data (Spark's convention; gcs_ocn_bq_ingest loaded them): {files}; rename them "
        "if they hold rows of the batch"
    )


def _whole_table_overwrite(
    configs: ConfigReader, success: str, warned: set[tuple[str, ...]]
) -> tuple[str, str] | None:
    """(the load.json, the warning) when the batch's mode is overwrite_partitions without a
    partition_by: unless the table was partitioned by hand, the job refuses each of its batches."""
    resolved = configs.resolve(success.rpartition("/")[0] + "/")
    if (
        resolved.load.mode != "overwrite_partitions"
        or resolved.load.partition_by
        or resolved.sources in warned
    ):
        return None
    warned.add(resolved.sources)
    where = next((s for s in reversed(resolved.sources) if s.endswith(LOAD_JSON)), success)
    return where, (
        "mode overwrite_partitions without partition_by: on a table with no partition spec it would "
        'replace the whole table, so the job fails each batch; set partition_by (e.g. ["days(ts)"]) '
        "to replace only the partitions a batch's rows fall in, or mode overwrite to replace the table"
    )


def _check_batch(
    store: ObjectStore,
    settings: Settings,
    configs: ConfigReader,
    name: str,
    *,
    bad_load_json: dict[str, str],
    names: list[str],
    sizes: dict[str, int],
    checker: validate_expectations.Checker,
) -> list[str]:
    folder = name.rpartition("/")[0] + "/"
    inherited = [
        f"{level}{CONFIG}/{LOAD_JSON}"
        for level in levels(folder)
        if f"{level}{CONFIG}/{LOAD_JSON}" in bad_load_json
    ]
    if inherited:
        files = ", ".join(object_uri(store, n) for n in inherited)
        return [f"cannot be applied: its config cascade includes the invalid {files} (see above)"]
    try:
        resolved = configs.resolve(folder)
        regex = resolved.load.destination_regex or settings.destination_regex
        batch = parse_success(store.bucket, name, regex)
    except (ConfigError, PathError) as exc:
        return [_without_uri(str(exc), store, name)]
    refusal = (
        publisher.root_batch_refusal(batch, _folder_batch(batch, names, settings.success_filename))
        if resolved.ordered or settings.order_per_table
        else None
    )
    if refusal is not None:
        return [_without_uri(refusal, store, name)]
    sub_folders = _check_sub_folders(
        object_uri(store, folder), folder, names, load=resolved.load, success=settings.success_filename
    )
    if sub_folders is not None:
        return [sub_folders]
    unreadable = _unreadable(store, folder, names, load=resolved.load, success=settings.success_filename)
    header = validate_mapping.header_problems(
        store, batch, resolved.load, (names, sizes), settings.success_filename
    )
    return (
        unreadable
        + header
        + validate_expectations.batch_problems(
            store, batch, resolved.load, (names, sizes), settings.success_filename, checker=checker
        )
        + validate_mapping.problems(
            store,
            batch,
            resolved.load,
            names,
            sizes,
            transform_sql=resolved.transform_sql,
            success_filename=settings.success_filename,
        )
    )


def _unreadable(
    store: ObjectStore, folder: str, names: list[str], *, load: LoadConfig, success: str
) -> list[str]:
    """The problems of a batch with data files whose names Spark cannot read as themselves, or
    whose extension names another format than the config's."""
    below = [n for n in names if n.startswith(folder)]
    uris = [
        object_uri(store, f)
        for f in data_files(folder, below, nested=load.nested_folders, success_filename=success)
    ]
    found = [unreadable_files(uris), format_mismatch(uris, load.format) if uris else None]
    return [problem for problem in found if problem]


def _folder_batch(batch: Batch, names: list[str], success: str) -> str | None:
    """The rel of a batch folder of `batch`'s table, when `batch` sits at its root (else None)."""
    if batch.rel:
        return None
    below = f"{batch.table.prefix}/"
    for name in (n for n in names if n != f"{below}{success}"):
        if (
            name.startswith(below)
            and name.endswith(f"/{success}")
            and classify(name, success) is ObjectKind.SUCCESS
        ):
            return name.removeprefix(below).removesuffix(f"/{success}")
    return None


def _check_sub_folders(
    where: str, folder: str, names: list[str], *, load: LoadConfig, success: str
) -> str | None:
    """A batch with data in sub-folders the config does not read: with `nested` unset on a text
    format, or none of its own files (sub-folders that are batches of their own do not count)."""
    below = [n for n in names if n.startswith(folder)]
    if load.nested_unsaid and (unread := unread_sub_folders(where, folder, below, success_filename=success)):
        return unread
    nested = load.nested_folders
    if nested or data_files(folder, below, success_filename=success):
        return None
    sub_folders = data_sub_folders(folder, below, success_filename=success)
    return no_data_files(where, sub_folders, nested=nested) if sub_folders else None


def _without_uri(message: str, store: ObjectStore, name: str) -> str:
    """The problem is printed next to its object: do not repeat the object's URI in front of it
    (path errors, built from names alone, spell it gs:// on any store)."""
    for uri in (object_uri(store, name), f"gs://{store.bucket}/{name}"):
        for lead in (f"{uri}: ", f"{uri} "):
            if message.startswith(lead):
                return message[len(lead) :]
    return message
