"""What the benchmark ran on (cores, memory, versions), and the machine's CPU time over an interval."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any


def _meminfo_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        return None
    return None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _java() -> str | None:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (done.stderr or done.stdout).strip().splitlines()
    match = re.search(r'version "([^"]+)"', first[0]) if first else None
    return match.group(1) if match else (first[0] if first else None)


def _package(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def describe(iceberg_jar: str | None = None) -> dict[str, Any]:
    iceberg = None
    if iceberg_jar:
        found = re.search(r"runtime-3\.5_2\.12-([\w.]+)\.jar", iceberg_jar)
        iceberg = found.group(1) if found else None
    return {
        "cores": os.cpu_count(),
        "memory_gib": _meminfo_gib(),
        "cpu": _cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": _java(),
        "spark": _package("pyspark"),
        "iceberg": iceberg,
        "spark_master": "local[2]",
        "executable": sys.executable,
    }


def _cpu_ticks() -> int:
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0
    # user nice system idle iowait irq softirq steal: busy time is all but idle and iowait
    values = [int(v) for v in fields[:8]]
    return sum(values) - values[3] - values[4]


class CpuMeter:
    """Busy CPU seconds of the whole machine (every process, every core) since it was made."""

    def __init__(self) -> None:
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._start = _cpu_ticks()

    def seconds(self) -> float:
        return (_cpu_ticks() - self._start) / self._hz


def _processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, CPU ticks used so far, command) for every process on the machine."""
    found: dict[int, tuple[int, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # gone since the listing
        command = text[text.find("(") + 1 : text.rfind(")")]
        fields = text[text.rfind(")") + 2 :].split()
        found[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]), command)
    return found


class OtherLoad:
    """Samples every process's CPU time once a second and adds up what processes outside this
    benchmark's own tree (and outside the kernel) used: other work competing for the same cores,
    which would bias the figures. `seconds()` is the running total."""

    def __init__(self, interval: float = 1.0) -> None:
        self._interval = interval
        self._hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self._ticks = 0
        self.by_command: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="other-load", daemon=True)

    def start(self) -> OtherLoad:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def seconds(self) -> float:
        return self._ticks / self._hz

    def _run(self) -> None:
        me = os.getpid()
        before = _processes()
        while not self._stop.wait(self._interval):
            now = _processes()
            children: dict[int, list[int]] = {}
            for pid, (parent, _, _) in now.items():
                children.setdefault(parent, []).append(pid)
            ours, todo = {me}, [me]
            while todo:
                for child in children.get(todo.pop(), []):
                    if child not in ours:
                        ours.add(child)
                        todo.append(child)
            for pid, (parent, ticks, command) in now.items():
                if pid in ours or pid == 2 or parent == 2 or pid not in before:
                    continue  # ours, the kernel's threads, or new (its ticks are counted from here on)
                used = ticks - before[pid][1]
                if used > 0:
                    self._ticks += used
                    self.by_command[command] = self.by_command.get(command, 0.0) + used / self._hz
            before = now
