"""The warm-driver policy (turnstile.jobs.driver_policy) replayed on arrival traces: DCU-seconds per
batch and modeled latency against one Dataproc batch per batch (per-job), and against one batch
for a whole backlog (coalesced per-job).

Computed, not measured on Dataproc. Requests arrive on seeded traces; a driver takes the start-up
(the documented 40-60 s: both ends are replayed) before its first request, then applies requests
one at a time, each taking the measured in-job seconds of a batch; a driver is billed at least the
one-minute minimum, its start-up and work at 12 DCU and its idle time at the idle DCU (12 too while
the batch keeps its executors). The decisions, whether to stay, leave or start another driver,
are the library's own functions, called as a driver would call them.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from turnstile.jobs import driver_policy as policy
from turnstile_dev.bench.costmodel import DCU_PER_JOB, MINIMUM_BILLED_SECONDS, STARTUP_SECONDS, one_job

SEED = 20260601
HOURS = 24
RECHECK = 1e-3  # a scale-out condition is "waited longer than a start-up": look just after


@dataclass(frozen=True)
class Trace:
    name: str
    arrivals: tuple[float, ...]
    target: str
    met: Callable[[dict[str, Any]], bool]
    coalesced: bool = False  # compare with one Dataproc batch for all its requests too


def traces(seed: int = SEED, hours: int = HOURS) -> list[Trace]:
    """The four traces of the feature request, seeded."""
    rng = random.Random(seed)
    burst = sorted(h * 3600 + rng.uniform(0, 300) for h in range(hours) for _ in range(50))
    every = sorted(k * 120 + rng.uniform(0, 12) for k in range(hours * 30))
    hourly = sorted(h * 3600 + rng.uniform(0, 360) for h in range(hours))
    return [
        Trace(
            "50 tables hourly, arriving within 5 minutes",
            tuple(burst),
            "<= 60 DCU-s per batch",
            lambda row: row["dcu_seconds_per_batch"] <= 60,
        ),
        Trace(
            "1 table every 2 minutes",
            tuple(every),
            "<= 0.5x per-job, median latency <= 5 s",
            lambda row: row["ratio_vs_per_job"] <= 0.5 and row["latency_median_seconds"] <= 5,
        ),
        Trace("1 table hourly", tuple(hourly), "<= 1.1x per-job", lambda row: row["ratio_vs_per_job"] <= 1.1),
        Trace(
            "a backlog of 100 at once",
            (0.0,) * 100,
            "<= coalesced per-job",
            lambda row: row["dcu_seconds_per_batch"] <= row["coalesced_dcu_seconds_per_batch"] + 1e-9,
            coalesced=True,
        ),
    ]


def policy_costs(idle_dcu: float = DCU_PER_JOB) -> policy.PolicyCosts:
    """Dataproc Serverless's prices (costmodel's constants) and the policy's default bounds. The
    policy assumes the slow end of the start-up."""
    return policy.PolicyCosts(
        dcu=DCU_PER_JOB,
        idle_dcu=idle_dcu,
        startup_seconds=STARTUP_SECONDS[1],
        min_billed_seconds=MINIMUM_BILLED_SECONDS,
    )


@dataclass
class _Driver:
    started_at: float
    ready_at: float
    busy_until: float | None = None
    idle_since: float | None = None
    stay_until: float | None = None
    left_at: float | None = None
    waited: float = 0.0  # idle seconds before it left
    busy: float = 0.0

    def view(self, rank: int, now: float) -> policy.DriverView:
        return policy.DriverView(self.started_at, self.idle_since, rank, starting=self.ready_at > now)


@dataclass
class Run:
    """What one replay spent and how long its requests took."""

    dcu_seconds: float
    latencies: list[float]
    starts: int
    peak_drivers: int
    leaves: dict[str, int]
    departures: list[tuple[float, str]]  # (when, why), in order


class _Replay:
    def __init__(
        self, arrivals: tuple[float, ...], job_seconds: float, startup: float, costs: policy.PolicyCosts
    ) -> None:
        if job_seconds <= 0 or startup <= 0:
            raise ValueError(f"job_seconds and startup must be > 0, got {job_seconds} and {startup}")
        self.arrivals, self.work, self.startup, self.costs = arrivals, job_seconds, startup, costs
        self.now = float("-inf")
        self.drivers: list[_Driver] = []
        self.queue: deque[float] = deque()  # arrival times of the requests no driver has taken
        self.history = policy.History()
        self.latencies: list[float] = []
        self.departures: list[tuple[float, str]] = []
        self.peak = 0

    def live(self) -> list[_Driver]:
        return [d for d in self.drivers if d.left_at is None]

    def ranks(self) -> dict[int, int]:
        """Rank of each driver taking requests: 0 for the oldest."""
        taking = [d for d in self.live() if policy.accepts_work(d.view(0, self.now), self.costs, self.now)]
        return {id(d): rank for rank, d in enumerate(sorted(taking, key=lambda d: d.started_at))}

    def run(self) -> Run:
        index = 0
        while index < len(self.arrivals) or self.queue or self.live():
            self.now = self.next_event(index)
            while index < len(self.arrivals) and self.arrivals[index] <= self.now:
                self.arrive()
                self.queue.append(self.arrivals[index])
                index += 1
            self.step()
        billed = sum(self.billed(d) for d in self.drivers)
        leaves: dict[str, int] = {}
        for _, reason in self.departures:
            leaves[reason] = leaves.get(reason, 0) + 1
        return Run(billed, self.latencies, len(self.drivers), self.peak, leaves, self.departures)

    def next_event(self, index: int) -> float:
        times = [self.arrivals[index]] if index < len(self.arrivals) else []
        for d in self.live():
            times += [t for t in (d.ready_at, d.busy_until, d.stay_until) if t is not None]
        if self.queue:
            times.append(self.queue[0] + self.costs.startup_seconds + RECHECK)
        return min(t for t in times if t > self.now)

    def arrive(self) -> None:
        """The history learns every request, on the clock of one driver that never leaves."""
        waited = None
        if not self.ranks():  # no driver taking requests: one starts now
            gone = [d for d in self.drivers if d.left_at is not None]
            waited = max(gone, key=lambda d: d.left_at or 0.0).waited if gone else 0.0
        self.history = policy.arrived(self.history, self.now, self.work, waited, self.costs)

    def step(self) -> None:
        now = self.now
        for d in self.live():
            if d.busy_until is not None and d.busy_until <= now:
                d.busy_until, d.idle_since = None, now
            elif d.busy_until is None and d.idle_since is None and d.ready_at <= now:
                d.idle_since = now  # up, nothing taken yet
        ranks = self.ranks()
        for d in sorted(self.live(), key=lambda d: ranks.get(id(d), len(ranks))):
            if self.queue and d.idle_since is not None and id(d) in ranks:
                self.latencies.append(now - self.queue.popleft() + self.work)
                d.busy_until, d.idle_since, d.stay_until = now + self.work, None, None
                d.busy += self.work
        self.decide()
        oldest = self.queue[0] if self.queue else None
        waiting = policy.QueueView(len(self.queue), oldest, self.work)
        ranks = self.ranks()
        views = [d.view(ranks.get(id(d), 0), now) for d in self.live()]
        for _ in range(policy.scale_out(waiting, views, self.costs, now)):
            self.drivers.append(_Driver(now, now + self.startup))
        self.peak = max(self.peak, len(self.live()))

    def decide(self) -> None:
        """Every idle driver asks the policy, the newest first; after a leave the ranks change."""
        changed = True
        while changed:
            changed = False
            ranks = self.ranks()
            for d in sorted(self.live(), key=lambda d: -d.started_at):
                if d.idle_since is None:
                    continue
                view = d.view(ranks.get(id(d), 0), self.now)
                decision = policy.stay_decision(view, self.history, self.costs, self.now)
                if isinstance(decision, policy.Leave):
                    d.left_at, d.stay_until, d.waited = self.now, None, self.now - d.idle_since
                    self.departures.append((self.now, decision.reason))
                    changed = True
                    break
                d.stay_until = decision.until

    def billed(self, d: _Driver) -> float:
        assert d.left_at is not None
        life, startup = d.left_at - d.started_at, d.ready_at - d.started_at
        spent = self.costs.dcu * (startup + d.busy) + self.costs.idle_dcu * (life - startup - d.busy)
        return max(self.costs.dcu * self.costs.min_billed_seconds, spent)


def replay(arrivals: tuple[float, ...], job_seconds: float, startup: float, costs: policy.PolicyCosts) -> Run:
    """Drivers run by the policy on `arrivals` (sorted seconds), each request `job_seconds` long."""
    return _Replay(tuple(sorted(arrivals)), job_seconds, startup, costs).run()


def offline_optimum(
    arrivals: tuple[float, ...], job_seconds: float, startup: float, costs: policy.PolicyCosts
) -> float:
    """The least DCU-s of drivers billed as the replay bills them, one driver at a time, never
    holding a request back, knowing every arrival: the cheapest split of the requests into
    consecutive driver lives (dynamic programming over where each life ends). A life never spans an
    idle gap of (2 x minimum + start-up) x dcu / idle_dcu or more: ending it there and starting
    another costs less, so the search stops at such a gap."""
    times, dcu, idle_dcu = sorted(arrivals), costs.dcu, costs.idle_dcu
    floor = dcu * costs.min_billed_seconds
    longest = (2 * costs.min_billed_seconds + startup) * dcu / idle_dcu
    best = [0.0] + [float("inf")] * len(times)
    for first in range(len(times)):
        if best[first] == float("inf"):
            continue  # a request there comes while the previous driver is still at work
        end, busy = times[first] + startup, 0.0
        for last in range(first, len(times)):
            if last > first and times[last] - end >= longest:
                break
            end, busy = max(end, times[last]) + job_seconds, busy + job_seconds
            if last + 1 < len(times) and times[last + 1] <= end:
                continue  # the next request comes before this driver could leave
            idle = end - times[first] - startup - busy
            cost = max(floor, dcu * (startup + busy) + idle_dcu * idle)
            best[last + 1] = min(best[last + 1], best[first] + cost)
    return best[-1]


def rows(job_seconds: float, idle_dcu: float = DCU_PER_JOB, seed: int = SEED) -> list[dict[str, Any]]:
    """One row per trace and start-up end: the policy's DCU-s per batch and latency beside
    per-job's (and coalesced per-job's for the backlog), the offline optimum under the same billing,
    and whether the feature's target is met."""
    costs = policy_costs(idle_dcu)
    found = []
    for trace in traces(seed):
        n = len(trace.arrivals)
        for label, startup in zip(("low", "high"), STARTUP_SECONDS, strict=True):
            run = replay(trace.arrivals, job_seconds, startup, costs)
            per_job = one_job(1, job_seconds, startup)["dcu_seconds"]
            coalesced = one_job(n, job_seconds, startup)["dcu_seconds"] / n
            optimum = offline_optimum(trace.arrivals, job_seconds, startup, costs) / n
            row: dict[str, Any] = {
                "trace": trace.name,
                "startup": label,
                "startup_seconds": startup,
                "requests": n,
                "dcu_seconds_per_batch": round(run.dcu_seconds / n, 2),
                "per_job_dcu_seconds_per_batch": round(per_job, 2),
                "ratio_vs_per_job": round(run.dcu_seconds / n / per_job, 3),
                "coalesced_dcu_seconds_per_batch": round(coalesced, 2) if trace.coalesced else None,
                "offline_optimum_dcu_seconds_per_batch": round(optimum, 2),
                "latency_median_seconds": round(statistics.median(run.latencies), 2),
                "latency_p95_seconds": round(statistics.quantiles(run.latencies, n=20)[-1], 2),
                "per_job_latency_seconds": round(startup + job_seconds, 2),
                "driver_starts": run.starts,
                "peak_drivers": run.peak_drivers,
                "leaves": dict(sorted(run.leaves.items())),
                "idle_dcu": idle_dcu,
                "target": trace.target,
            }
            row["met"] = trace.met(row)
            found.append(row)
    return found


def markdown(found: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the bench report and docs/DRIVER.md print it)."""
    lines = [
        "| trace | start-up | DCU-s per batch | per-job | ratio | offline optimum | coalesced | "
        "latency median / p95 | per-job latency | driver starts | target | met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in found:
        lines.append(
            f"| {r['trace']} | {r['startup_seconds']:g} s | {r['dcu_seconds_per_batch']:g} | "
            f"{r['per_job_dcu_seconds_per_batch']:g} | {r['ratio_vs_per_job']:g} | "
            f"{r['offline_optimum_dcu_seconds_per_batch']:g} | "
            f"{_or_dash(r['coalesced_dcu_seconds_per_batch'])} | "
            f"{r['latency_median_seconds']:g} / {r['latency_p95_seconds']:g} s | "
            f"{r['per_job_latency_seconds']:g} s | {r['driver_starts']} | {r['target']} | "
            f"{'yes' if r['met'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def _or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
