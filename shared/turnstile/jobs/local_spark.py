"""The jars and Spark properties a local Spark session needs to read and write Iceberg tables.

The Iceberg Spark runtime comes from the PyPI package `snowpark-connect-deps-iceberg`, so no
Maven download is needed. That jar was built without the Jackson classes Iceberg relocates to
`org.apache.iceberg.shaded.com.fasterxml.jackson` (every metadata read or write then fails with
`NoClassDefFoundError`), so we build them once: pyspark's own Jackson jars, relocated by jarjar.

Run `python -m turnstile.jobs.local_spark [TARGET_DIR]` to build the jars and print their paths.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Sequence
from importlib.util import find_spec
from pathlib import Path

from turnstile.core.errors import SettingsError
from turnstile.jobs.catalog import iceberg_catalog_properties

MIN_JAVA = 17
JAVA_HINT = "install OpenJDK 17: apt-get install openjdk-17-jre-headless"
JARJAR = Path("/usr/share/java/jarjar.jar")
JARJAR_HINT = "install jarjar: apt-get install libjarjar-java"
DEFAULT_TARGET = Path(".turnstile/jars")

# pyspark 3.5 is built for Scala 2.12; the 2.13 runtime in the same package would not load.
ICEBERG_RUNTIME = re.compile(r"iceberg-spark-runtime-3\.5_2\.12-(\d[\w.]*)\.jar")
# The artifacts the Iceberg runtime references under its shaded Jackson prefix: the three core
# ones for table metadata, jsr310 for the shaded Arrow's ObjectMapperFactory. The exact version
# pattern keeps `jackson-core-asl-1.9.13.jar` out.
JACKSON_ARTIFACTS = ("jackson-annotations", "jackson-core", "jackson-databind", "jackson-datatype-jsr310")
JACKSON_RULE = "rule com.fasterxml.jackson.** org.apache.iceberg.shaded.com.fasterxml.jackson.@1\n"
# Only classes go into the relocated jar: no META-INF, so no signatures, no service files naming
# unrelocated classes, and no multi-release `META-INF/versions/` copies jarjar would mis-place.
JACKSON_PREFIX = "com/fasterxml/jackson/"

_JAVA_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


def parse_java_version(text: str) -> int:
    """Major version from `java -version` output: `1.8.0_392` is 8, `17.0.15` is 17."""
    match = _JAVA_VERSION.search(text)
    if match is None:
        raise SettingsError(f"cannot read the Java version from {text.strip()[:200]!r}; {JAVA_HINT}")
    major = int(match.group(1))
    if major == 1 and match.group(2) is not None:
        return int(match.group(2))
    return major


def java_version(java: str = "java") -> int:
    """Major version of the `java` on PATH, the one pyspark starts when JAVA_HOME is unset."""
    exe = shutil.which(java)
    if exe is None:
        raise SettingsError(f"{java} not found on PATH; {JAVA_HINT}")
    try:
        done = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SettingsError(f"cannot run {exe} -version ({exc}); {JAVA_HINT}") from exc
    # `java -version` writes to stderr.
    return parse_java_version(done.stderr + done.stdout)


def check_java(version: Callable[[], int] = java_version) -> int:
    """Fail early, with the fix, instead of letting Spark die with an obscure JVM error."""
    found = version()
    if found < MIN_JAVA:
        raise SettingsError(f"Java {found} found, Spark with Iceberg needs {MIN_JAVA} or newer; {JAVA_HINT}")
    return found


def _package_dir(package: str) -> Path:
    """Folder of an installed package, found without importing it (importing pyspark is slow)."""
    spec = find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError(f"Python package {package} is not installed; pip install -r requirements.txt")
    return Path(next(iter(spec.submodule_search_locations)))


def _find_jar(folder: Path, pattern: re.Pattern[str], what: str) -> Path:
    found = sorted(p for p in folder.glob("*.jar") if pattern.fullmatch(p.name))
    if not found:
        raise SettingsError(f"no {what} jar in {folder}; reinstall the Python requirements")
    return found[-1]


def iceberg_runtime_jar() -> Path:
    """The Iceberg Spark 3.5 / Scala 2.12 runtime, referenced in place (it is 42 MB)."""
    return _find_jar(
        _package_dir("snowpark_connect_deps_iceberg") / "jars", ICEBERG_RUNTIME, "Iceberg runtime"
    )


def jackson_jars() -> list[Path]:
    """pyspark's Jackson jars, the same version Spark itself runs with."""
    folder = _package_dir("pyspark") / "jars"
    return [
        _find_jar(folder, re.compile(rf"{name}-(\d+\.\d+\.\d+)\.jar"), name) for name in JACKSON_ARTIFACTS
    ]


def _is_fresh(target: Path, inputs: Iterable[Path]) -> bool:
    if not target.is_file():
        return False
    built = target.stat().st_mtime
    return all(p.stat().st_mtime <= built for p in inputs)


def _merge_classes(jars: Sequence[Path], merged: Path) -> None:
    """One input jar for jarjar, which takes only one; the first copy of a name wins."""
    seen: set[str] = set()
    with zipfile.ZipFile(merged, "w", zipfile.ZIP_STORED) as out:
        for jar in jars:
            with zipfile.ZipFile(jar) as src:
                for info in src.infolist():
                    name = info.filename
                    if info.is_dir() or not name.startswith(JACKSON_PREFIX) or name in seen:
                        continue
                    seen.add(name)
                    out.writestr(name, src.read(info))


def _relocate(jars: Sequence[Path], target: Path, jarjar: Path) -> None:
    """Merge, relocate, then rename into place so a reader never sees a half-written jar."""
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        work = Path(tmp)
        merged, rules, out = work / "merged.jar", work / "rules.txt", work / "out.jar"
        _merge_classes(jars, merged)
        rules.write_text(JACKSON_RULE)
        cmd = ["java", "-jar", str(jarjar), "process", str(rules), str(merged), str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
        except FileNotFoundError as exc:
            raise SettingsError(f"java not found on PATH; {JAVA_HINT}") from exc
        if done.returncode != 0 or not out.is_file():
            detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise SettingsError(f"jarjar failed (exit {done.returncode}): {detail[0]}")
        os.replace(out, target)


def ensure_jars(target_dir: Path, *, jarjar: Path = JARJAR) -> list[Path]:
    """Jars for `spark.jars`: the Iceberg runtime and the relocated Jackson built in target_dir.

    Rebuilds only when the relocated jar is missing or older than an input, so a second call
    costs a few stat calls.
    """
    runtime = iceberg_runtime_jar()
    inputs = jackson_jars()
    version = ICEBERG_RUNTIME.fullmatch(runtime.name)
    suffix = version.group(1) if version else "unknown"
    jackson_version = inputs[0].stem.rsplit("-", 1)[-1]
    target = target_dir / f"iceberg-{suffix}-shaded-jackson-{jackson_version}.jar"
    if not _is_fresh(target, inputs):
        if not jarjar.is_file():
            raise SettingsError(f"{jarjar} not found; {JARJAR_HINT}")
        target_dir.mkdir(parents=True, exist_ok=True)
        _relocate(inputs, target, jarjar)
    return [runtime, target]


LOGGING = Path(__file__).with_name("log4j2-local.properties")
CORES = 2  # local Spark's: a warm local driver runs as many jobs at once


def spark_conf(jars: list[Path], warehouse: Path, catalog: str = "local") -> dict[str, str]:
    """Settings for a local session with a Hadoop Iceberg catalog `catalog` rooted at warehouse."""
    return {
        "spark.master": f"local[{CORES}]",
        "spark.jars": ",".join(str(p.resolve()) for p in jars),
        **iceberg_catalog_properties(catalog, "hadoop", warehouse=warehouse.resolve().as_uri()),
        # Several local processes may write the same tables; always read current metadata.
        f"spark.sql.catalog.{catalog}.cache-enabled": "false",
        # No Hive metastore: no Derby `metastore_db/` in the working directory, faster start.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.session.timeZone": "UTC",
        # Fast, quiet start on a small machine: no web UI, no progress bars, loopback only.
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "WARN",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        # Local sessions are short and tables tiny: C1-only JIT and the serial collector start
        # about 1.5 s faster on 2 cores than the default C2 and G1.
        "spark.driver.extraJavaOptions": (
            f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Dlog4j2.configurationFile={LOGGING.as_uri()}"
        ),
        # Python workers (UDFs) run the driver's interpreter, so the same pyspark.
        "spark.pyspark.python": sys.executable,
        # Tiny tables: 200 shuffle partitions would mean 200 tasks (and files) per MERGE.
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.adaptive.enabled": "true",
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Build the jars and print one path per line; exit 2 with the reason when that fails."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) > 1:
        print("usage: python -m turnstile.jobs.local_spark [TARGET_DIR]", file=sys.stderr)
        return 2
    target_dir = Path(args[0]) if args else DEFAULT_TARGET
    try:
        check_java()
        jars = ensure_jars(target_dir)
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for jar in jars:
        print(jar)
    return 0


if __name__ == "__main__":
    sys.exit(main())
