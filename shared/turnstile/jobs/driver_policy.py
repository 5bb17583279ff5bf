"""When a warm driver stays up and when another one starts: a pure rent-or-buy policy.

A warm driver (a Dataproc Serverless or EMR Serverless batch that takes job requests from a spool)
cannot be given an idle TTL: it decides by itself, with `stay_decision`, whether to wait for the
next request or to leave; `scale_out` says whether another driver should start. Both are pure: no
I/O, no clock (the time is passed in), every input a frozen value.

The idle rule is ski rental. Waiting costs `idle_dcu` DCU-s a second; leaving costs a restart,
`restart_cost` = `dcu` x max(start-up, billing minimum) DCU-s, when the next request comes. The
classic rule waits `break_even_seconds` (restart cost / idle rate) and is 2-competitive. This one
waits the threshold that would have cost least over the recent gaps (`predicted_threshold`), moved
towards the break-even just enough to keep a running ledger (`History.shortfall`) within twice the
offline optimum: on every sequence of gaps, whatever the predictions, it spends at most 2x the
optimum of the rent-or-buy cost model when `max_idle_seconds` >= the break-even, and otherwise at
most one restart more for each gap whose threshold `max_idle_seconds` or `max_lifetime_seconds`
cut below it. docs/DRIVER.md states the model, the proof and the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias


@dataclass(frozen=True, kw_only=True)
class PolicyCosts:
    """The platform's prices and the deployment's bounds. Times in seconds, costs in DCU-seconds."""

    dcu: float
    """DCU of a driver at work (Dataproc Serverless's smallest batch: 12)."""
    idle_dcu: float
    """DCU an idle driver still bills (the same 12 while the batch keeps its executors)."""
    startup_seconds: float
    """How long a new driver takes to take its first request (Dataproc documents 40-60 s)."""
    min_billed_seconds: float
    """A batch is billed at least this long (Dataproc: 60 s)."""
    max_idle_seconds: float = 300.0
    """No driver stays idle longer, whatever the rule says."""
    max_lifetime_seconds: float = 3600.0
    """Past this age a driver takes no new request and leaves when idle (so its successor runs the
    current code and config)."""
    max_drivers: int = 4
    """Drivers taking requests at once."""
    history_size: int = 32
    """Recent idle gaps the prediction looks at."""

    def __post_init__(self) -> None:
        positive = ("dcu", "startup_seconds", "max_lifetime_seconds")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"PolicyCosts.{name} must be > 0, got {getattr(self, name)!r}")
        for name in ("idle_dcu", "min_billed_seconds", "max_idle_seconds"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"PolicyCosts.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.max_drivers < 1 or self.history_size < 1:
            raise ValueError(
                f"PolicyCosts.max_drivers and history_size must be >= 1, got {self.max_drivers} "
                f"and {self.history_size}"
            )

    @property
    def restart_cost(self) -> float:
        """DCU-s a restart adds at most: the start-up is billed, and a batch at least the minimum."""
        return self.dcu * max(self.startup_seconds, self.min_billed_seconds)

    @property
    def break_even_seconds(self) -> float:
        """Idle seconds that cost one restart: the classic rule's threshold B (none: idle is free)."""
        return self.restart_cost / self.idle_dcu if self.idle_dcu else float("inf")


def laptop_costs(max_idle_seconds: float, max_lifetime_seconds: float) -> PolicyCosts:
    """A local machine's: an idle driver costs nothing there, so it waits `max_idle_seconds` (as the
    local folder spool's driver waits LOCAL_DRIVER_IDLE_SECONDS); a start-up is a spark-submit."""
    return PolicyCosts(
        dcu=1,
        idle_dcu=0,
        startup_seconds=10,
        min_billed_seconds=0,
        max_idle_seconds=max_idle_seconds,
        max_lifetime_seconds=max_lifetime_seconds,
    )


def dataproc_costs(max_idle_seconds: float, max_lifetime_seconds: float, max_drivers: int = 4) -> PolicyCosts:
    """Dataproc Serverless's prices (docs/DRIVER.md, "Parameters") with the deployment's bounds."""
    return PolicyCosts(
        dcu=12,
        idle_dcu=12,
        startup_seconds=60,
        min_billed_seconds=60,
        max_idle_seconds=max_idle_seconds,
        max_lifetime_seconds=max_lifetime_seconds,
        max_drivers=max_drivers,
    )


def emr_costs(max_idle_seconds: float, max_lifetime_seconds: float, max_drivers: int = 4) -> PolicyCosts:
    """EMR Serverless's, in vCPU-seconds (docs/DRIVER.md, "Parameters"), which come to Dataproc's
    figures: a driver and two executors of 4 vCPU (12), billed per second with a one-minute minimum,
    idle at the same rate (Spark's dynamic allocation keeps executors until their idle timeout: the
    policy assumes the worst), and a start-up taken as 60 s (no pre-initialized capacity)."""
    return dataproc_costs(max_idle_seconds, max_lifetime_seconds, max_drivers)


PRICES: Mapping[str, Callable[[float, float], PolicyCosts]] = {
    "dataproc": dataproc_costs,
    "emr": emr_costs,
    "laptop": laptop_costs,
}
"""The prices a driver's `--prices` names, given its max idle and max lifetime."""


@dataclass(frozen=True)
class History:
    """What the deployment has seen, kept across drivers (a successor starts from its
    predecessor's history): its idle clock, the recent idle gaps, and the ledger of the bound.

    The gaps are those of one driver that never leaves, so they do not depend on the policy: a
    restart delays the work by a start-up, which would otherwise make the next gap look shorter.

    `shortfall` is how much of its one-restart allowance the policy has used: 0 means it has spent
    at most 2x the offline optimum minus one restart; it exceeds the allowance only by gaps that the
    bounds cut short (see `observe`)."""

    gaps: tuple[float, ...] = ()
    """Recent idle gaps, oldest first, in seconds."""
    shortfall: float = 0.0
    finished_at: float | None = None
    """When the work so far would have ended on one driver that never left (None: no request yet)."""

    def __post_init__(self) -> None:
        if any(not gap >= 0 for gap in self.gaps) or not self.shortfall >= 0:
            raise ValueError(f"History needs gaps >= 0 and shortfall >= 0, got {self!r}")


@dataclass(frozen=True)
class DriverView:
    """One driver as the policy sees it."""

    started_at: float
    idle_since: float | None
    """When it last finished its work with nothing queued; None while it works or starts up."""
    rank: int = 0
    """0 for the oldest driver taking requests, 1 for the next one started, and so on."""
    starting: bool = False
    """Still starting up: it takes the queue when it is up."""
    awaited: bool = False
    """A request is known to be coming: a job it ran said more of its table's backlog waits behind
    it, and that table's next request has not come yet."""


@dataclass(frozen=True)
class QueueView:
    """The requests no driver has taken yet."""

    waiting: int
    oldest_since: float | None = None
    """When the oldest waiting request arrived."""
    job_seconds: float | None = None
    """Recent in-job seconds of a request (None: not known yet, the wait alone decides)."""


@dataclass(frozen=True)
class Stay:
    until: float | None
    """Ask again at this time, or as soon as the driver is idle (None: it is working)."""


LeaveReason: TypeAlias = Literal["max lifetime", "max idle", "rent-or-buy", "extra driver"]


@dataclass(frozen=True)
class Leave:
    reason: LeaveReason


Decision: TypeAlias = Stay | Leave


def gap_cost(gap: float, waited: float | None, costs: PolicyCosts) -> float:
    """The cost model's price of one idle gap: waited through (`waited` None) or left after
    waiting `waited` seconds, then restarted for the next request."""
    if waited is None:
        return costs.idle_dcu * gap
    return costs.idle_dcu * waited + costs.restart_cost


def optimal_gap_cost(gap: float, costs: PolicyCosts) -> float:
    """What the offline optimum, knowing the gap, pays for it: wait through it or restart."""
    return min(costs.idle_dcu * gap, costs.restart_cost)


def predicted_threshold(gaps: Sequence[float], costs: PolicyCosts) -> float:
    """The idle time that would have cost least over `gaps` (ties: the longer wait), among 0 and the
    gaps themselves. No gap, or only gaps too long to be worth waiting for: 0, leave at once."""
    ordered = sorted(gaps)
    rate, restart = costs.idle_dcu, costs.restart_cost
    best, best_cost = 0.0, float("inf")
    waited, caught = 0.0, 0  # the gaps up to the candidate: their sum and count
    for threshold in (0.0, *ordered):
        while caught < len(ordered) and ordered[caught] <= threshold:
            waited, caught = waited + ordered[caught], caught + 1
        cost = rate * waited + (len(ordered) - caught) * (rate * threshold + restart)
        if cost <= best_cost:
            best, best_cost = threshold, cost
    return best


def idle_threshold(history: History, costs: PolicyCosts, rank: int = 0) -> float:
    """How long a driver of `rank` waits idle before it leaves.

    An extra driver (rank >= 1) waits one start-up (if the queue grows again, a new one would be up
    as soon), or less if the oldest would: extras leave first. The oldest one waits the predicted
    threshold clamped to [B - s/r, B + s/r], where s is the ledger's slack (one restart minus the
    shortfall) and r the idle rate: its worst case on the coming gap, |restart cost - r x
    threshold| above twice the optimum, is then covered by s. With no slack left it waits exactly
    B, which is never worse than 2x the optimum. Never longer than `max_idle_seconds`."""
    return min(_unbounded_threshold(history, costs, rank), costs.max_idle_seconds)


def _unbounded_threshold(history: History, costs: PolicyCosts, rank: int) -> float:
    if rank > 0:
        return min(costs.startup_seconds, _unbounded_threshold(history, costs, 0))
    if not costs.idle_dcu:  # idle costs nothing: waiting never loses
        return costs.max_idle_seconds
    rate, breakeven = costs.idle_dcu, costs.break_even_seconds
    slack = costs.restart_cost - history.shortfall
    low, high = (breakeven, breakeven)
    if slack >= 0:
        low, high = max(0.0, breakeven - slack / rate), breakeven + slack / rate
    predicted = predicted_threshold(history.gaps[-costs.history_size :], costs)
    return min(max(predicted, low), high)


def accepts_work(view: DriverView, costs: PolicyCosts, now: float) -> bool:
    """A driver takes new requests until its maximum lifetime; then it finishes what it runs and
    leaves, and its successor starts on the next request (so it picks up new code and config)."""
    return now - view.started_at < costs.max_lifetime_seconds


def stay_decision(view: DriverView, history: History, costs: PolicyCosts, now: float) -> Decision:
    """Whether the driver in `view` stays up at `now`; a `Stay` says when to ask again. A driver
    counts its idle time from its own last request. The oldest does not wait for busy extras: if
    it leaves, the next one becomes the oldest."""
    if not accepts_work(view, costs, now):
        return Leave("max lifetime")
    if view.idle_since is None:
        return Stay(until=None)
    retire_at = view.started_at + costs.max_lifetime_seconds
    leave_at = min(view.idle_since + _waited(view, history, costs), retire_at)
    if now < leave_at:
        return Stay(until=leave_at)
    if view.rank > 0:
        return Leave("extra driver")
    if leave_at == retire_at:
        return Leave("max lifetime")
    cut = _unbounded_threshold(history, costs, 0) > costs.max_idle_seconds or not costs.idle_dcu
    return Leave("max idle" if cut else "rent-or-buy")


def _waited(view: DriverView, history: History, costs: PolicyCosts) -> float:
    """How long the driver in `view` waits idle. For a request known to be coming, the oldest waits
    at least the break-even (never more than `max_idle_seconds`): the next gap is known to be short,
    and a wait of B is never worse than twice the optimum whatever the gap turns out to be."""
    threshold = idle_threshold(history, costs, view.rank)
    if view.awaited and view.rank == 0:
        return max(threshold, min(costs.break_even_seconds, costs.max_idle_seconds))
    return threshold


def scale_out(queue: QueueView, drivers: Sequence[DriverView], costs: PolicyCosts, now: float) -> int:
    """How many drivers to start now (0 or 1).

    One when requests wait and no driver takes requests (the first driver, or a retiring driver's
    successor). Another one, up to `max_drivers`, when the oldest request has waited longer than a
    start-up and the queue would still last a start-up with the drivers up: a driver started then
    takes requests that would otherwise wait longer than it took to start. One start at a time."""
    if queue.waiting == 0:
        return 0
    taking = [d for d in drivers if accepts_work(d, costs, now)]
    if not taking:
        return 1
    if any(d.starting for d in taking) or len(taking) >= costs.max_drivers:
        return 0
    waited = now - queue.oldest_since if queue.oldest_since is not None else 0.0
    if waited <= costs.startup_seconds:
        return 0
    if (
        queue.job_seconds is not None
        and queue.waiting * queue.job_seconds / len(taking) <= costs.startup_seconds
    ):
        return 0
    return 1


def observe(history: History, gap: float, waited: float | None, costs: PolicyCosts) -> History:
    """The history after an idle gap of `gap` seconds ended with a request: a driver waited through
    it (`waited` None), or the last one left after `waited` seconds and a new one started.

    The ledger: slack grows by 2 x the optimum's price of the gap minus the policy's, and is kept
    at most one restart (so a long good run cannot pay for a long bad one)."""
    if not gap >= 0 or (waited is not None and not 0 <= waited <= gap):
        raise ValueError(f"observe needs 0 <= waited <= gap, got gap={gap!r}, waited={waited!r}")
    earned = 2 * optimal_gap_cost(gap, costs) - gap_cost(gap, waited, costs)
    shortfall = max(0.0, history.shortfall - earned)
    gaps = (*history.gaps, gap)[-costs.history_size :]
    return History(gaps=gaps, shortfall=shortfall, finished_at=history.finished_at)


def arrived(
    history: History, at: float, job_seconds: float, waited: float | None, costs: PolicyCosts
) -> History:
    """The history after a request arrived at `at`, expected to take `job_seconds` of work.
    `waited`: None if a driver was taking requests when it came, else how long the last driver
    had stayed idle before it left.

    Gaps are measured on the clock of one driver that never leaves (`History.finished_at`): the
    request ends a gap if that driver would have been idle, and its work moves the clock on."""
    if not job_seconds >= 0:
        raise ValueError(f"arrived needs job_seconds >= 0, got {job_seconds!r}")
    start = at if history.finished_at is None else max(at, history.finished_at)
    if history.finished_at is not None and at > history.finished_at:
        gap = at - history.finished_at
        history = observe(history, gap, None if waited is None else min(max(waited, 0.0), gap), costs)
    return History(gaps=history.gaps, shortfall=history.shortfall, finished_at=start + job_seconds)
