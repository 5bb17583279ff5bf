"""`python -m turnstile_dev.simulation --seeds N --seed-base B` (what `make simulate` runs)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Annotated

import typer

from turnstile_dev.simulation.spoolrun import run_spool_many, run_spool_schedule
from turnstile_dev.simulation.world import run_many, run_schedule


def main(
    seeds: Annotated[int, typer.Option(help="how many schedules")] = 1000,
    seed_base: Annotated[int, typer.Option(help="the first seed")] = 0,
    replay: Annotated[int | None, typer.Option(help="play one seed and print its violations")] = None,
    replay_spool: Annotated[int | None, typer.Option(help="the same, of the warm drivers' spool")] = None,
) -> None:
    for seed, play in ((replay, run_schedule), (replay_spool, run_spool_schedule)):
        if seed is not None:
            problems = play(seed)
            for problem in problems:
                print(f"seed {seed}: {problem}")
            print(f"1 schedules, {len(problems)} violations")
            sys.exit(1 if problems else 0)
    started = time.monotonic()
    stats: Counter[str] = Counter()
    count, failures = run_many(seeds, seed_base, stats)
    for seed, problems in failures:
        for problem in problems:
            print(f"seed {seed}: {problem}")
        print(f"  replay: make simulate SEEDS=1 SEED_BASE={seed}")
    # The warm drivers' spool in the bucket: the same seeds, its own schedules and invariants.
    _, spool_failures = run_spool_many(seeds, seed_base, stats)
    for seed, problems in spool_failures:
        for problem in problems:
            print(f"spool seed {seed}: {problem}")
        print(f"  replay: python -m turnstile_dev.simulation --replay-spool {seed}")
    violations = sum(len(p) for _, p in failures + spool_failures)
    summary = ", ".join(f"{value} {key}" for key, value in sorted(stats.items()))
    print(f"in {time.monotonic() - started:.1f} s: {summary}")
    print(f"{count} schedules, {violations} violations")
    sys.exit(1 if violations else 0)


if __name__ == "__main__":
    typer.run(main)
