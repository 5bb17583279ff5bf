"""`make demo`: turnstile on the embedded local stack, through a realistic day.

- `shop.stock`: hourly stock movements, ordered; each hour's transform.sql MERGEs its deltas into
  the running stock and appends the hour to an audit trail, so the table is right only if the hours
  apply in order. The hours arrive out of order.
- `shop.orders`: a historical load uploaded in parallel (out of order) behind `_HISTORYDONE`, then
  incremental hours; one hour is broken (a row that does not parse), which blocks the table until
  the demo fixes the file and runs `turnstile unlock`.
- `web.clicks`: unordered appends, applied as they arrive.
- `mart.climate`: a derived table, one hourly step joining `sensors.temp` and `sensors.humidity`,
  which arrive out of step: it waits, `turnstile status` says for what, then it catches up. Then
  hour 11's temperature is corrected upstream and reprocessed: turnstile rebuilds the climate step
  that read it (mode `replace_window`), once, and `turnstile history` says why.
- `shop.payments`: an ordered table with an audit (no negative amount): each hour is committed to
  the audit branch, audited, and published to `main` only when it passes; a bad hour blocks the
  table without ever reaching `main`, and `unlock --skip-head` drops it.

`make demo UI=1` (`--ui`) then keeps the stack up and serves the operator console over it
(`turnstile ui`), printing its URL, until Ctrl-C.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from turnstile.config.settings import child_environment
from turnstile.core import logs
from turnstile.core.clock import SystemClock
from turnstile.entrypoints.wiring import job_runner
from turnstile.jobs.local_spark import ensure_jars, spark_conf
from turnstile.local.stack import Stack, StackOptions, settings_for
from turnstile.names.paths import Table
from turnstile.protocol.context import Invocation
from turnstile.protocol.operator import unlock
from turnstile.state.records import Lock, LockState
from turnstile.store.gcs import GcsStore, make_client

GATE = "_HISTORYDONE"
STOCK_SQL = """MERGE INTO ${table} t USING (
  SELECT sku, sum(delta) AS delta, max('${rel}') AS hour FROM batch GROUP BY sku) b
ON t.sku = b.sku
WHEN MATCHED THEN UPDATE SET t.qty = t.qty + b.delta, t.trail = concat(t.trail, ' ', substr(b.hour, 12, 2))
WHEN NOT MATCHED THEN INSERT (sku, qty, trail) VALUES (b.sku, b.delta, substr(b.hour, 12, 2))"""


CLIMATE_SQL = """SELECT t.ts, t.celsius, h.percent
FROM ${catalog}.sensors.temp t JOIN ${catalog}.sensors.humidity h ON t.ts = h.ts
WHERE t.ts >= ${window_start} AND t.ts < ${window_end}"""
SENSORS = ("sensors/temp", "sensors/humidity")
SHOWN = ("shop/stock", "shop/orders", "web/clicks")


def say(text: str) -> None:
    print(text, flush=True)


class Demo:
    def __init__(self, home: Path) -> None:
        shutil.rmtree(home, ignore_errors=True)
        self.stack = Stack(
            StackOptions(home=home, sweep_every=20, environment={"START_BACKFILL_FILENAME": GATE})
        )
        self.store: GcsStore | None = None
        self.started = time.monotonic()

    @property
    def bucket(self) -> GcsStore:
        assert self.store is not None
        return self.store

    def put(self, folder: str, csv: str) -> None:
        """Upstream: the data file, then `_SUCCESS` last."""
        self.bucket.write(f"{folder}/part-0.csv", csv.encode())
        self.bucket.write(f"{folder}/_SUCCESS", b"")

    def lock(self, table: str) -> Lock:
        found = self.bucket.read(f"{table}/_bqlock")
        return Lock() if found is None else Lock.decode(found.data, table)

    def waiting(self, table: str) -> int:
        return len(self.bucket.list_objects(f"{table}/_backlog/"))

    def applied(self, table: str) -> int:
        return len(self.bucket.list_objects(f"{table}/_turnstile/results/"))

    def wait(
        self, what: str, done: Callable[[], bool], timeout: float = 300, tables: tuple[str, ...] = SHOWN
    ) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"demo: timed out waiting for {what}; logs in {self.stack.home / 'logs'}")
            line = "  " + "  ".join(
                f"{t}: {self.lock(t).state.value.lower()}, {self.waiting(t)} queued, {self.applied(t)} done"
                for t in tables
            )
            if line != last:
                say(f"{line}   [{time.monotonic() - self.started:4.0f}s]")
                last = line
            time.sleep(2)

    def settled(self, table: str, results: int) -> bool:
        return (
            self.lock(table).state is LockState.FREE
            and not self.waiting(table)
            and self.applied(table) >= results
        )

    def run(self) -> None:
        self.stack.home.mkdir(parents=True, exist_ok=True)
        logs.configure("INFO", (self.stack.home / "demo.log").open("a"))  # the demo's own JSON logs
        say("starting the local stack (GCS emulator, function hosts, event bridge, local Spark + Iceberg)...")
        info = self.stack.start()
        self.store = GcsStore(make_client("local", info.storage_url), info.bucket)
        say(f"  storage {info.storage_url}  bucket gs://{info.bucket}  functions {info.function_url}\n")
        self.configure()

        say("1. upstream drops stock hours 13, 11, 12, 10 (out of order), click batches, a historical load")
        for hour, rows in (("13", "a,-2\nb,5"), ("11", "a,-1"), ("12", "b,-3\na,4"), ("10", "a,10\nb,10")):
            self.put(f"shop/stock/2024/05/01/{hour}", f"sku,delta\n{rows}\n")
        self.put("web/clicks/2024/05/01", "user,page\nu1,/home\nu2,/cart\n")
        self.put("web/clicks/2024/05/02", "user,page\nu3,/home\nu1,/checkout\n")
        for month in ("03", "01", "02"):  # a parallel historical load
            self.put(
                f"shop/orders/historical/2024/{month}", f"order_id,amount\n{month}1,10.0\n{month}2,20.5\n"
            )
        self.bucket.write(f"shop/stock/{GATE}", b"")  # stock has no history: let it run
        self.wait("stock and clicks", lambda: self.settled("shop/stock", 4) and self.settled("web/clicks", 2))
        say("   the historical orders wait behind the gate; now upstream marks the history done")
        self.bucket.write(f"shop/orders/{GATE}", b"")
        self.wait("the historical orders", lambda: self.settled("shop/orders", 3))

        say("\n2. incremental orders arrive; hour 10 has a broken row")
        self.put("shop/orders/incremental/2024/05/01/10", "order_id,amount\n501,5.0\n502,not-a-number\n")
        self.put("shop/orders/incremental/2024/05/01/11", "order_id,amount\n601,7.5\n")
        self.wait(
            "the broken batch to block its table", lambda: self.lock("shop/orders").state is LockState.FAILED
        )
        lock = self.lock("shop/orders")
        say(f"   BLOCKED at {lock.failed_rel}: {lock.error}")
        say(f"   hour 11 stays queued ({self.waiting('shop/orders')} queued)")
        say(
            "   the data team fixes the file and runs: "
            + (lock.unlock_command or "").replace(" [--skip-head]", "")
        )
        self.bucket.write(
            "shop/orders/incremental/2024/05/01/10/part-0.csv", b"order_id,amount\n501,5.0\n502,6.0\n"
        )
        settings = settings_for(info)
        invocation = Invocation(
            self.bucket,
            job_runner(settings, self.bucket),
            settings,
            SystemClock(),
            "demo",
            SystemClock().now(),
        )
        done = unlock(invocation, Table(info.bucket, "shop/orders", "shop", "orders"), skip_head=False)
        say(f"   unlocked {done.failed_rel}; the subscriber restarts and retries it, then hour 11")
        self.wait("the orders to catch up", lambda: self.settled("shop/orders", 5))
        self.dependent(info.home, info.bucket)
        self.rebuilt(info.home, info.bucket)
        self.audited(invocation, info.bucket)
        say(f"\nall batches applied in {time.monotonic() - self.started:.0f}s\n")
        self.show(info.warehouse, info.catalog)
        say("$ turnstile status")
        status = [sys.executable, "-m", "turnstile.cli", "status"]
        subprocess.run(
            status, env=child_environment({"TURNSTILE_HOME": info.home, "COLUMNS": "160"}), check=False
        )
        say(
            "(mart/climate is WAITING, not stuck: it is built up to hour 12, and its next step, hour 13, "
            "waits for both sensors' hour 13)"
        )

    def sensor_hour(self, table: str, hour: int, value: float) -> None:
        column = "celsius" if table.endswith("temp") else "percent"
        self.put(f"{table}/2024/05/01/{hour:02d}", f"ts,{column}\n2024-05-01 {hour:02d}:00:00,{value}\n")

    def dependent(self, home: str, bucket: str) -> None:
        say("\n3. sensors arrive out of step: temperatures for hours 10-12, humidity only for hour 10")
        for hour in (10, 11, 12):
            self.sensor_hour("sensors/temp", hour, 20.0 + hour)
        self.sensor_hour("sensors/humidity", 10, 40.0)
        tables = ("mart/climate", *SENSORS)
        self.wait("the first climate step", lambda: self.applied("mart/climate") >= 1, tables=tables)
        say("   mart.climate built hour 10 and waits; turnstile status says for what:")
        status = [sys.executable, "-m", "turnstile.cli", "status", f"gs://{bucket}/mart/climate"]
        environment = child_environment({"TURNSTILE_HOME": home, "COLUMNS": "160"})
        shown = subprocess.run(status, env=environment, check=False, capture_output=True, text=True)
        for line in shown.stdout.splitlines():
            if "waits for" in line:
                say(f"   {line}")
        say("   humidity for hours 11 and 12 arrives; mart.climate catches up, hour by hour")
        self.sensor_hour("sensors/humidity", 11, 42.0)
        self.sensor_hour("sensors/humidity", 12, 44.0)
        self.wait("mart.climate to catch up", lambda: self.settled("mart/climate", 3), tables=tables)

    def rebuilt(self, home: str, bucket: str) -> None:
        say("\n4. hour 11's temperature was wrong: upstream corrects the file, the data team reprocesses it")
        self.bucket.write("sensors/temp/2024/05/01/11/part-0.csv", b"ts,celsius\n2024-05-01 11:00:00,21.5\n")
        environment = child_environment({"TURNSTILE_HOME": home, "COLUMNS": "160"})
        cli = [sys.executable, "-m", "turnstile.cli"]
        batch = f"gs://{bucket}/sensors/temp/2024/05/01/11"
        say(f"   $ turnstile reprocess {batch} --reason 'corrected upstream'")
        subprocess.run(
            [*cli, "reprocess", batch, "--reason", "corrected upstream"], env=environment, check=True
        )
        tables = ("mart/climate", *SENSORS)
        built = self.applied("mart/climate")
        self.wait(
            "mart.climate's hour 11 to be rebuilt",
            lambda: self.settled("mart/climate", built + 1) and not self.requests("mart/climate"),
            tables=tables,
        )
        say("   turnstile rebuilt the climate step that had read it (replace_window: its hour replaced):")
        history = [*cli, "history", f"gs://{bucket}/mart/climate"]
        shown = subprocess.run(history, env=environment, check=False, capture_output=True, text=True)
        for line in shown.stdout.splitlines():
            say(f"   {line}")

    def requests(self, table: str) -> int:
        return len(self.bucket.list_objects(f"{table}/_turnstile/reprocess/"))

    def audited(self, invocation: Invocation, bucket: str) -> None:
        say("\n5. payments are audited before they are published: hour 11 holds a negative amount")
        for hour, rows in (("10", "1,12.5\n2,3.0"), ("11", "3,8.0\n4,-50.0"), ("12", "5,4.5")):
            self.put(f"shop/payments/2024/05/01/{hour}", f"payment_id,amount\n{rows}\n")
        tables = ("shop/payments",)
        self.wait(
            "the audit to block hour 11",
            lambda: self.lock("shop/payments").state is LockState.FAILED,
            tables=tables,
        )
        lock = self.lock("shop/payments")
        say(f"   BLOCKED at {lock.failed_rel}; main holds hour 10 only. The audit says:")
        for line in (lock.error or "").split("; "):
            say(f"     {line}")
        say(
            "   the bad hour is dropped with turnstile unlock --skip-head; "
            "the next job discards its staged commit"
        )
        table = Table(bucket, "shop/payments", "shop", "payments")
        unlock(invocation, table, skip_head=True)
        self.wait("hour 12", lambda: self.settled("shop/payments", 3), tables=tables)

    def configure(self) -> None:
        write = self.bucket.write
        write("shop/payments/_config/ORDERME", b"")
        payments = {
            "schema": "payment_id INT, amount DOUBLE",
            "audits": [{"name": "no_negative_amount", "sql": "SELECT * FROM ${staged} WHERE amount < 0"}],
        }
        write("shop/payments/_config/load.json", json.dumps(payments).encode())
        write(f"shop/payments/{GATE}", b"")
        for table in SENSORS:
            write(f"{table}/_config/ORDERME", b"")
            column = "celsius" if table.endswith("temp") else "percent"
            load = {
                "schema": f"ts TIMESTAMP, {column} DOUBLE",
                "natural_time": "hourly",
                "mode": "overwrite_partitions",  # an hour reprocessed replaces its rows
                "partition_by": ["hours(ts)"],
            }
            write(f"{table}/_config/load.json", json.dumps(load).encode())
            write(f"{table}/{GATE}", b"")
        climate = {
            "derived": {"step": "1h", "start": "2024-05-01T10:00:00Z"},
            "depends_on": ["sensors.temp", "sensors.humidity"],
            "mode": "replace_window",  # a step rebuilt after a source hour changed replaces its window
            "time_column": "ts",
            "partition_by": ["hours(ts)"],
        }
        write("mart/climate/_config/ORDERME", b"")
        write("mart/climate/_config/load.json", json.dumps(climate).encode())
        write("mart/climate/_config/transform.sql", CLIMATE_SQL.encode())
        write(f"mart/climate/{GATE}", b"")
        write("shop/stock/_config/ORDERME", b"")
        write(
            "shop/stock/_config/load.json",
            json.dumps({"table_schema": "sku STRING, qty BIGINT, trail STRING"}).encode(),
        )
        write("shop/stock/_config/transform.sql", STOCK_SQL.encode())
        write("shop/orders/_config/ORDERME", b"")
        write(
            "shop/orders/_config/load.json",
            json.dumps({"schema": "order_id INT, amount DOUBLE", "max_batches_per_job": 5}).encode(),
        )
        write("web/clicks/_config/load.json", json.dumps({"format": "csv"}).encode())

    def show(self, warehouse: str, catalog: str) -> None:
        builder = SparkSession.builder.appName("turnstile-demo")
        for key, value in spark_conf(ensure_jars(self.stack.home / "jars"), Path(warehouse), catalog).items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            tables = (("shop.stock", "sku"), ("shop.orders", "order_id"), ("web.clicks", "user, page"))
            for table, order in tables:
                say(f"{catalog}.{table}:")
                spark.sql(f"SELECT * FROM {catalog}.{table} ORDER BY {order}").show(truncate=False)
            say(f"{catalog}.shop.payments (main: audited hours only, hour 11 never reached it):")
            spark.sql(f"SELECT * FROM {catalog}.shop.payments ORDER BY payment_id").show(truncate=False)
            say(
                f"{catalog}.mart.climate (one step per hour, built once both sensors had the hour; "
                "hour 11 rebuilt with the corrected temperature):"
            )
            spark.sql(f"SELECT * FROM {catalog}.mart.climate ORDER BY ts").show(truncate=False)
            say("commits of shop.stock, in order (one per hour, whatever order they arrived in):")
            spark.sql(
                "SELECT committed_at, operation, summary['turnstile.rel'] AS rel "
                f"FROM {catalog}.shop.stock.snapshots ORDER BY committed_at"
            ).show(truncate=False)
        finally:
            spark.stop()

    def console(self) -> None:
        """`turnstile ui` over the running stack, as an operator starts it, until Ctrl-C."""
        assert self.stack.info is not None
        environment = child_environment({"TURNSTILE_HOME": self.stack.info.home})
        command = [sys.executable, "-m", "turnstile.cli", "ui", "--port", str(CONSOLE_PORT)]
        # The Spark session of `show` left its own Ctrl-C handler behind, which fails once it stopped.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        served = subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, text=True)
        try:
            assert served.stdout is not None
            for line in served.stdout:
                if (found := CONSOLE_URL.search(line)) is not None:
                    say(f"\nthe operator console: {found.group(1)}")
                    say("(the stack stays up until Ctrl-C; turnstile status and the other commands work too)")
                    break
            served.wait()
        except KeyboardInterrupt:  # a terminal's Ctrl-C reaches both; a signal to the demo alone, not
            served.send_signal(signal.SIGINT)
            served.wait(timeout=20)

    def stop(self) -> None:
        self.stack.stop()


CONSOLE_PORT = 8765
CONSOLE_URL = re.compile(r"(http://127\.0\.0\.1:\d+/\?token=\S+)")


def main(argv: list[str] | None = None) -> None:
    ui = "--ui" in (sys.argv[1:] if argv is None else argv)
    demo = Demo(Path(".turnstile/demo"))
    try:
        demo.run()
        if ui:
            demo.console()
        else:
            say(
                "\nto look at all of this in the operator console, run: make demo UI=1 (it keeps the stack "
                f"up and prints the console's URL, http://127.0.0.1:{CONSOLE_PORT}/?token=...); on a stack "
                "of your own: turnstile up, then turnstile ui --open"
            )
    except KeyboardInterrupt:
        say("interrupted")
        sys.exit(130)
    finally:
        demo.stop()
        say("stack stopped")


if __name__ == "__main__":
    main()
