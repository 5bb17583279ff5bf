"""Play the spool's schedules (`turnstile_dev.simulation.spool`) and check their invariants."""

from __future__ import annotations

import io
import itertools
import random
from collections import Counter

from turnstile.core import logs
from turnstile.names import driverspool as names
from turnstile.state.spoolrecords import JobFinished, Outcome
from turnstile.store.memory import MemoryStore
from turnstile.store.port import ObjectStore
from turnstile.store.split import SplitStore
from turnstile_dev.simulation.engine import Loop, SimClock
from turnstile_dev.simulation.spool import (
    BOUNDS,
    CALM_POLL,
    PROMPT,
    RUNNER_POLL,
    SpoolPlan,
    SpoolWorld,
    StallingStore,
)


def build(seed: int, stats: Counter[str]) -> SpoolWorld:
    rng = random.Random(seed)
    plan = SpoolPlan.draw(rng)
    loop = Loop(rng)
    clock = SimClock(loop)
    generations = itertools.count(1_700_000_000_000_001)
    data = MemoryStore("data", clock=clock, generations=generations)
    memory: ObjectStore = data
    if seed % 2:  # the spool in a state bucket
        memory = SplitStore(data, MemoryStore("state", clock=clock, generations=generations))
    return SpoolWorld(seed, plan, loop, StallingStore(memory, loop), memory, stats, clock)


def schedule(world: SpoolWorld) -> float:
    """Schedule the world's jobs and faults; when the last job is submitted."""
    plan, rng = world.plan, world.loop.rng
    for index in range(plan.garbage):
        world.add_garbage(index)
    for index in range(plan.jobs):
        job = f"job-{index:03d}"
        at = rng.uniform(0, plan.fault_end)
        world.submit_job(job, at)
        if rng.random() < plan.withdraws:
            world.withdraw_job(job, at + rng.choice([0.0, 0.05, rng.uniform(0, 120)]))
    for _ in range(plan.by_hand):
        world.remove_by_hand(rng.uniform(0, plan.fault_end))
    # Once faults stop: a job or two after another, as a driver is about to leave, then a long gap
    # (a request no driver takes would wait for a runner's poll, or for the next group's submit).
    at = plan.fault_end + world.calm_after
    for index in range(plan.calm_jobs):
        job = f"calm-{index:03d}"
        world.calm.add(job)
        at += rng.uniform(0, 60) if rng.random() < 0.6 else rng.uniform(600, 1200)
        world.submit_job(job, at)
    world.loop.at(plan.fault_end, lambda: setattr(world.loop, "faults_on", False))
    return at


def ends(world: SpoolWorld) -> dict[str, JobFinished | None]:
    found = {}
    for job in world.submitted_at:
        read = world.memory.read(names.finished_name(job))
        found[job] = None if read is None else JobFinished.decode(read.data, read.name)
    return found


def settled(world: SpoolWorld) -> bool:
    everyone = world.plan.jobs + world.plan.calm_jobs
    return (
        len(world.submitted_at) == everyone
        and all(end is not None for end in ends(world).values())
        and not world.memory.list_objects(names.REQUESTS)
    )


def violations(world: SpoolWorld, settled_in_time: bool) -> list[str]:
    problems = list(world.unexpected)
    finished = ends(world)
    if not settled_in_time:
        queued = [i.name for i in world.memory.list_objects(names.REQUESTS)]
        problems.append(
            f"not settled: jobs without an end {[j for j, e in finished.items() if e is None]}, "
            f"requests left {queued}"
        )
    for job, count in world.runs.items():
        if count > 1:
            problems.append(f"{job} ran {count} times")
    for job, end in finished.items():
        ran = world.runs[job]
        if end is None:
            continue
        world.stats[f"jobs {end.outcome.value}"] += 1
        if end.outcome in (Outcome.SUCCEEDED, Outcome.FAILED) and ran != 1:
            problems.append(f"{job} ended {end.outcome.value} but ran {ran} times")
        if end.outcome is Outcome.WITHDRAWN and ran:
            problems.append(f"{job} was withdrawn but ran")
        if end.outcome is Outcome.FAILED_TRANSIENT and ran:
            world.stats["jobs ran, then reported failed (a stalled driver declared dead)"] += 1
            if not excused(world, end):
                problems.append(f"{job} ran, yet was reported failed: {end.error}")
        if any(world.timeouts.get(job, [])) and (ran or end.outcome is not Outcome.FAILED_TRANSIENT):
            problems.append(
                f"{job}: its start timeout won, yet it ran {ran} times and ended {end.outcome.value}"
            )
        for withdrawn, driver in world.withdrawals.get(job, []):
            if withdrawn and end.outcome is not Outcome.WITHDRAWN:
                problems.append(f"{job}: its withdraw won, but it ended {end.outcome.value}")
            if not withdrawn and driver is not None and end.outcome is Outcome.WITHDRAWN:
                problems.append(f"{job}: its withdraw was told {driver} took it, but it ended WITHDRAWN")
    for job in sorted(world.calm):
        end = finished.get(job)
        waited = world.first_run_at.get(job, float("inf")) - world.submitted_at.get(job, 0.0)
        if end is not None and end.outcome is not Outcome.WITHDRAWN and waited > PROMPT:
            problems.append(f"{job}, submitted once faults stopped, waited {waited:.0f} s for a driver")
    for name in world.junk:
        if name not in world.removed and world.memory.read(names.rejected_name(name)) is None:
            problems.append(f"garbage request {name} was not recorded rejected")
    return problems


def excused(world: SpoolWorld, end: JobFinished) -> bool:
    """Whether a job that ran may be reported FAILED_TRANSIENT: only when its driver was declared
    dead (it stalled past the stale bound), or a person removed spool objects."""
    error = end.error or ""
    return "died" in error or "ended while it ran" in error or bool(world.removed)


def run_spool_schedule(seed: int, stats: Counter[str] | None = None) -> list[str]:
    """Play spool schedule `seed`; its invariant violations (empty: they held)."""
    stats = stats if stats is not None else Counter()
    logs.configure("CRITICAL", io.StringIO())
    world = build(seed, stats)
    last_submit = schedule(world)
    horizon = last_submit + 3 * RUNNER_POLL[1] + 3 * CALM_POLL[1] + BOUNDS.stale_after.total_seconds()
    done = world.loop.run(horizon, lambda: settled(world))
    stats["spool schedules"] += 1
    stats["spool jobs"] += world.plan.jobs + world.plan.calm_jobs
    return violations(world, done)


def run_spool_many(
    seeds: int, seed_base: int, stats: Counter[str]
) -> tuple[int, list[tuple[int, list[str]]]]:
    failures = []
    for seed in range(seed_base, seed_base + seeds):
        problems = run_spool_schedule(seed, stats)
        if problems:
            failures.append((seed, problems))
    return seeds, failures
