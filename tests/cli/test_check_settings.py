"""`turnstile check-settings`: the functions' environment checked as the functions read it, from a
file (KEY=VALUE or Terraform's JSON) or from this environment, with the variable and fix per problem."""

from __future__ import annotations

import json
from pathlib import Path

import hcl2
import pytest
from click.testing import Result
from typer.testing import CliRunner

from turnstile.cli import app
from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.entrypoints import wiring, wiring_aws
from turnstile.store.memory import MemoryStore

# What terraform/main.tf renders for the functions (local.function_env), with example values.
DEPLOYED = {
    "JOB_RUNNER": "dataproc",
    "GOOGLE_CLOUD_PROJECT": "my-project",
    "FUNCTION_TIMEOUT_SEC": "540",
    "RESTART_BUFFER_SECONDS": "30",
    "LOG_LEVEL": "INFO",
    "SUCCESS_FILENAME": "_SUCCESS",
    "ORDER_PER_TABLE": "false",
    "WAIT_FOR_VALIDATION": "false",
    "JOB_PREFIX": "turnstile",
    "STALE_CLAIM_SECONDS": "3600",
    "DATAPROC_REGION": "europe-west1",
    "DATAPROC_RUNTIME_VERSION": "2.2",
    "DATAPROC_SERVICE_ACCOUNT": "turnstile-batch@my-project.iam.gserviceaccount.com",
    "DATAPROC_STAGING_BUCKET": "my-project-turnstile-dataproc",
    "DATAPROC_PROPERTIES": json.dumps({"spark.dataproc.driverEnv.ICEBERG_CATALOG": "turnstile"}),
    "DATAPROC_LABELS": json.dumps({"app": "turnstile", "deployment": "turnstile"}),
    "JOB_MAIN_URI": "gs://my-project-turnstile-artifacts/job/0123456789abcdef/main.py",
    "JOB_PYTHON_FILE_URIS": "gs://my-project-turnstile-artifacts/job/0123456789abcdef/turnstile.zip",
    "JOB_JAR_URIS": "gs://my-project-turnstile-artifacts/jars/iceberg.jar,gs://spark-lib/biglake/catalog.jar",
    "JOB_ARCHIVE_URIS": "gs://my-project-turnstile-artifacts/job/0123456789abcdef/deps.zip#turnstile_deps",
    "ICEBERG_CATALOG": "turnstile",
    "ICEBERG_CATALOG_TYPE": "biglake",
    "ICEBERG_WAREHOUSE": "gs://my-project-turnstile-warehouse/iceberg",
    "DRIVER": "warm",
    "DRIVER_MAIN_URI": "gs://my-project-turnstile-artifacts/job/0123456789abcdef/driver.py",
    "DRIVER_MAX_IDLE_SECONDS": "300",
    "DRIVER_MAX_LIFETIME_SECONDS": "3600",
    "DRIVER_START_TIMEOUT_SECONDS": "600",
    "DRIVER_SLOTS": "4",
    "DRIVER_MAX_COUNT": "4",
    # The tests build the runner for real; an endpoint makes its client anonymous (no credentials).
    "DATAPROC_ENDPOINT": "http://127.0.0.1:1",
}


def check(*args: str) -> Result:
    return CliRunner().invoke(app, ["check-settings", *args])


def env_file(tmp_path: Path, values: dict[str, str], *, as_json: bool = False) -> str:
    path = tmp_path / ("env.json" if as_json else "env")
    if as_json:
        path.write_text(json.dumps(values))
    else:
        path.write_text("# rendered\n\n" + "".join(f"{k}='{v}'\n" for k, v in values.items()))
    return str(path)


def problem_lines(result: Result) -> dict[str, str]:
    """The problem lines of the text output, by variable."""
    lines = [line.strip() for line in result.stdout.splitlines()[1:]]
    return {line.split(":", 1)[0]: line for line in lines}


def test_the_deployed_environment_passes_and_the_runner_builds_from_it(tmp_path: Path) -> None:
    for as_json in (False, True):
        result = check("--env-file", env_file(tmp_path, DEPLOYED, as_json=as_json))
        assert result.exit_code == 0, result.output
        assert "no problems found (runner dataproc)" in result.stdout
    settings = Settings.from_env(DEPLOYED)
    assert wiring.job_runner(settings, MemoryStore("b")) is not None  # what a cold start builds


def test_each_bad_value_is_named_with_its_variable_and_fix(tmp_path: Path) -> None:
    bad = DEPLOYED | {
        "JOB_PREFIX": "Turnstile_Prod",
        "FUNCTION_TIMEOUT_SEC": "5",
        "DESTINATION_REGEX": "(?P<dataset>[^/]+)/",
        "DATAPROC_PROPERTIES": "{not json",
    }
    result = check("--env-file", env_file(tmp_path, bad))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert set(found) == {"JOB_PREFIX", "FUNCTION_TIMEOUT_SEC", "DESTINATION_REGEX", "DATAPROC_PROPERTIES"}
    assert "'Turnstile_Prod'" in found["JOB_PREFIX"] and "lowercase" in found["JOB_PREFIX"]
    assert "greater than or equal to 10" in found["FUNCTION_TIMEOUT_SEC"]
    assert "needs the named groups ['table']" in found["DESTINATION_REGEX"]
    assert all("; fix: " in line for line in found.values())
    assert "4 problem(s)" in result.stdout
    with pytest.raises(SettingsError):  # the functions would refuse the same environment
        Settings.from_env(bad)


def test_a_bad_value_does_not_hide_the_problems_checked_after_it(tmp_path: Path) -> None:
    """Rules across variables and the runner's needs want valid values: the variables at fault are
    set aside, so one run reports everything."""
    bad = {
        "JOB_RUNNER": "dataproc",
        "ORDER_PER_TABLE": "maybe",
        "FUNCTION_TIMEOUT_SEC": "20",
        "RESTART_BUFFER_SECONDS": "30",
    }
    result = check("--env-file", env_file(tmp_path, bad))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert set(found) == {
        "ORDER_PER_TABLE",
        "RESTART_BUFFER_SECONDS",
        "GOOGLE_CLOUD_PROJECT",
        "JOB_MAIN_URI",
        "ICEBERG_CATALOG_TYPE",
    }
    assert "must be less than FUNCTION_TIMEOUT_SEC (20)" in found["RESTART_BUFFER_SECONDS"]


def test_what_the_dataproc_runner_needs_is_checked_as_the_runner_builds_it(tmp_path: Path) -> None:
    lacking = {k: v for k, v in DEPLOYED.items() if k not in ("JOB_MAIN_URI", "GOOGLE_CLOUD_PROJECT")}
    result = check("--env-file", env_file(tmp_path, lacking))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert "JOB_MAIN_URI is not set" in found["JOB_MAIN_URI"]
    assert "GOOGLE_CLOUD_PROJECT" in found
    with pytest.raises(SettingsError, match=r"GOOGLE_CLOUD_PROJECT|JOB_MAIN_URI"):
        wiring.job_runner(Settings.from_env(lacking), MemoryStore("b"))


def test_warm_drivers_need_their_staged_main_file(tmp_path: Path) -> None:
    lacking = {k: v for k, v in DEPLOYED.items() if k != "DRIVER_MAIN_URI"}
    result = check("--env-file", env_file(tmp_path, lacking))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert set(found) == {"DRIVER_MAIN_URI"}
    assert "DRIVER_MAIN_URI is not set" in found["DRIVER_MAIN_URI"]
    with pytest.raises(SettingsError, match="DRIVER_MAIN_URI"):
        wiring.job_runner(Settings.from_env(lacking), MemoryStore("b"))
    wrong = DEPLOYED | {"DRIVER_MAIN_URI": "gs://my-project-turnstile-artifacts/job/driver.zip"}
    found = problem_lines(check("--env-file", env_file(tmp_path, wrong)))
    assert set(found) == {"DRIVER_MAIN_URI"} and "not a .py file" in found["DRIVER_MAIN_URI"]
    per_job = lacking | {"DRIVER": "per_job"}
    assert check("--env-file", env_file(tmp_path, per_job)).exit_code == 0


def test_values_the_dataproc_api_or_gcs_refuse_are_reported(tmp_path: Path) -> None:
    bad = DEPLOYED | {
        "DATAPROC_LABELS": json.dumps({"Team": "Data Eng"}),
        "JOB_JAR_URIS": "my-bucket/iceberg.jar",
        "ICEBERG_CATALOG_TYPE": "hadoop",
        "ICEBERG_WAREHOUSE": "/tmp/warehouse",
    }
    result = check("--env-file", env_file(tmp_path, bad, as_json=True))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert set(found) == {"DATAPROC_LABELS", "JOB_JAR_URIS", "ICEBERG_CATALOG_TYPE", "ICEBERG_WAREHOUSE"}
    assert "Team='Data Eng'" in found["DATAPROC_LABELS"]
    assert "'my-bucket/iceberg.jar'" in found["JOB_JAR_URIS"]
    assert "atomic rename" in found["ICEBERG_CATALOG_TYPE"]


def test_a_misspelt_name_in_a_file_is_a_problem_with_the_likely_name(tmp_path: Path) -> None:
    lacking = {k: v for k, v in DEPLOYED.items() if k != "JOB_MAIN_URI"}
    result = check("--env-file", env_file(tmp_path, lacking | {"JOB_PREFX": "turnstile"}))
    assert result.exit_code == 1
    found = problem_lines(result)
    assert "did you mean JOB_PREFIX?" in found["JOB_PREFX"]
    assert set(found) == {"JOB_PREFX", "JOB_MAIN_URI"}  # the runner is still checked


def test_the_current_environment_is_checked_without_its_unrelated_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in Settings.variables():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOME_UNRELATED_VARIABLE", "x")
    assert check().exit_code == 0
    monkeypatch.setenv("LOG_LEVEL", "verbose")
    result = check()
    assert result.exit_code == 1
    assert set(problem_lines(result)) == {"LOG_LEVEL"}
    assert "this environment" in result.stdout


def test_json_output_lists_the_problems(tmp_path: Path) -> None:
    result = check("--env-file", env_file(tmp_path, DEPLOYED | {"LOG_LEVEL": "loud"}), "--output", "json")
    assert result.exit_code == 1
    [problem] = json.loads(result.stdout)["problems"]
    assert problem["variable"] == "LOG_LEVEL" and "'loud'" in problem["problem"] and problem["fix"]


def test_a_file_that_is_not_key_value_lines_is_refused_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "env"
    path.write_text("LOG_LEVEL=INFO\njust some words\n")
    result = check("--env-file", str(path))
    assert result.exit_code == 2
    assert f"error: {path}:2: 'just some words' is not KEY=VALUE;" in result.stderr
    missing = check("--env-file", str(tmp_path / "absent"))
    assert missing.exit_code == 2 and "cannot read the environment file" in missing.stderr


def test_a_plan_without_an_environment_is_named_as_such(tmp_path: Path) -> None:
    """`jq .environment_variables` of a plan whose environment is unknown until apply gives `null`."""
    path = tmp_path / "function-env.json"
    path.write_text("null\n")
    result = check("--env-file", str(path))
    assert result.exit_code == 2
    assert f"error: {path}: the plan holds no environment (JSON null: its values are unknown until apply" in (
        result.stderr
    )
    assert "is not KEY=VALUE" not in result.stderr


def test_the_example_environment_is_the_one_terraform_renders() -> None:
    """DEPLOYED above has every variable terraform/main.tf gives the functions, except those empty
    (so dropped) with the default inputs."""
    with (Path(__file__).resolve().parents[2] / "terraform" / "main.tf").open() as handle:
        parsed = hcl2.load(handle)
    rendered = next(block["function_env_all"] for block in parsed["locals"] if "function_env_all" in block)
    empty_by_default = {
        "DESTINATION_REGEX",
        "START_BACKFILL_FILENAME",
        "STATE_BUCKET",
        "DATAPROC_SUBNETWORK",
        "ICEBERG_CATALOG_URI",
    }
    assert set(DEPLOYED) - {"DATAPROC_ENDPOINT"} == set(rendered) - empty_by_default


# -- AWS: the Lambda's environment (docs/DEPLOY-AWS.md) -------------------------------------------------

AWS_DEPLOYED = {
    "JOB_RUNNER": "emr",
    "EMR_APPLICATION_ID": "00fabcdefgh12345",
    "EMR_EXECUTION_ROLE_ARN": "arn:aws:iam::123456789012:role/turnstile-jobs",
    "JOB_MAIN_URI": "s3://artifacts/turnstile/main.py",
    "JOB_PYTHON_FILE_URIS": "s3://artifacts/turnstile/turnstile.zip",
    "ICEBERG_CATALOG": "lake",
    "ICEBERG_CATALOG_TYPE": "glue",
    "ICEBERG_WAREHOUSE": "s3://warehouse/iceberg",
    "FUNCTION_TIMEOUT_SEC": "540",
}


def test_the_lambda_environment_passes_and_the_emr_runner_builds_from_it(tmp_path: Path) -> None:
    result = check("--env-file", env_file(tmp_path, AWS_DEPLOYED))
    assert result.exit_code == 0, result.output
    assert "no problems found (runner emr)" in result.stdout
    # What a cold start builds (Lambda sets AWS_REGION itself).
    settings = Settings.from_env(AWS_DEPLOYED | {"AWS_REGION": "eu-west-1"})
    assert wiring_aws.job_runner(settings, MemoryStore("b")) is not None


def test_what_the_emr_runner_refuses_is_reported_per_variable(tmp_path: Path) -> None:
    bad = {k: v for k, v in AWS_DEPLOYED.items() if not k.startswith("EMR_")} | {
        "JOB_MAIN_URI": "gs://artifacts/turnstile/main.py",
        "ICEBERG_CATALOG_TYPE": "biglake",
        "ICEBERG_WAREHOUSE": "gs://warehouse/iceberg",
    }
    result = check("--env-file", env_file(tmp_path, bad))
    assert result.exit_code == 1, result.output
    found = problem_lines(result)
    assert set(found) == {"EMR_APPLICATION_ID", "JOB_MAIN_URI", "ICEBERG_CATALOG_TYPE", "ICEBERG_WAREHOUSE"}
    assert "EMR_APPLICATION_ID, EMR_EXECUTION_ROLE_ARN not set" in found["EMR_APPLICATION_ID"]
    assert "not in S3" in found["JOB_MAIN_URI"]
    assert "biglake is Google's" in found["ICEBERG_CATALOG_TYPE"]
    assert "not in S3" in found["ICEBERG_WAREHOUSE"]
    not_py = AWS_DEPLOYED | {"JOB_MAIN_URI": "s3://artifacts/turnstile/main.zip"}
    assert (
        "is not a .py file" in problem_lines(check("--env-file", env_file(tmp_path, not_py)))["JOB_MAIN_URI"]
    )


def test_a_forgotten_job_runner_in_an_aws_environment_is_reported_and_refused(tmp_path: Path) -> None:
    forgotten = {k: v for k, v in AWS_DEPLOYED.items() if k != "JOB_RUNNER"}
    result = check("--env-file", env_file(tmp_path, forgotten))
    assert result.exit_code == 1, result.output
    [line] = problem_lines(result).values()
    assert line.startswith(
        "JOB_RUNNER: is local (its default) but the environment is AWS's (EMR_APPLICATION_ID"
    )
    assert "set JOB_RUNNER=emr" in line
    with_endpoint = forgotten | {"AWS_ENDPOINT_URL": "http://127.0.0.1:5000"}  # moto: jobs run locally
    assert check("--env-file", env_file(tmp_path, with_endpoint)).exit_code == 0
    with pytest.raises(SettingsError, match=r"JOB_RUNNER is local \(its default\).*set JOB_RUNNER=emr"):
        wiring_aws.job_runner(Settings.from_env(forgotten | {"AWS_REGION": "eu-west-1"}), MemoryStore("b"))
