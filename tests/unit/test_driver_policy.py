"""The warm driver's stay-up / scale-out policy (turnstile.jobs.driver_policy): its decisions, its
ledger, and the bound docs/DRIVER.md states, checked on random and adversarial gap sequences."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnstile.jobs.driver_policy import (
    PRICES,
    DriverView,
    History,
    Leave,
    PolicyCosts,
    QueueView,
    Stay,
    accepts_work,
    arrived,
    gap_cost,
    idle_threshold,
    laptop_costs,
    observe,
    optimal_gap_cost,
    predicted_threshold,
    scale_out,
    stay_decision,
)

# Dataproc Serverless: 12 DCU, the slow end of the 40-60 s start-up, the one-minute minimum.
DATAPROC = PolicyCosts(
    dcu=12,
    idle_dcu=12,
    startup_seconds=60,
    min_billed_seconds=60,
    max_idle_seconds=300,
    max_lifetime_seconds=3600,
    max_drivers=4,
)
R = 720.0  # the restart's price, DCU-s
B = 60.0  # the break-even, idle seconds
UNBOUNDED = dataclasses.replace(DATAPROC, max_idle_seconds=math.inf, max_lifetime_seconds=math.inf)


def test_a_restart_costs_the_start_up_or_the_billing_minimum_and_breaks_even_after_as_long_idle() -> None:
    assert (DATAPROC.restart_cost, DATAPROC.break_even_seconds) == (R, B)
    faster = dataclasses.replace(DATAPROC, startup_seconds=40)
    assert faster.restart_cost == R  # a 40 s start-up is still billed the minute
    slower = dataclasses.replace(DATAPROC, startup_seconds=90)
    assert (slower.restart_cost, slower.break_even_seconds) == (1080, 90)
    cheap_idle = dataclasses.replace(DATAPROC, idle_dcu=4)
    assert cheap_idle.break_even_seconds == 180


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("dcu", 0, "PolicyCosts.dcu must be > 0, got 0"),
        ("idle_dcu", -1, "PolicyCosts.idle_dcu must be >= 0"),
        ("startup_seconds", math.nan, "PolicyCosts.startup_seconds must be > 0, got nan"),
        ("max_idle_seconds", -5, "PolicyCosts.max_idle_seconds must be >= 0"),
        ("max_drivers", 0, "max_drivers and history_size must be >= 1, got 0"),
    ],
)
def test_bad_costs_are_refused_naming_the_field(field: str, value: float, says: str) -> None:
    with pytest.raises(ValueError, match="PolicyCosts") as caught:
        dataclasses.replace(DATAPROC, **{field: value})
    assert says in str(caught.value)


# -- the prediction -----------------------------------------------------------------------------------


def brute_force_threshold(gaps: list[float], costs: PolicyCosts) -> tuple[float, float]:
    def total(threshold: float) -> float:
        return sum(gap_cost(g, None if g <= threshold else threshold, costs) for g in gaps)

    best = min(total(t) for t in [0.0, *gaps])
    return best, max(t for t in [0.0, *gaps] if math.isclose(total(t), best, rel_tol=1e-9, abs_tol=1e-9))


@pytest.mark.parametrize(
    ("gaps", "threshold"),
    [
        ([], 0.0),  # nothing seen: nothing says a request is coming
        ([3600.0, 3500.0, 3700.0], 0.0),  # a trickle: every gap costs more idle than a restart
        ([5.0, 10.0, 20.0], 20.0),  # a burst: wait through all of them
        ([10.0] * 5 + [3600.0], 10.0),  # a burst, then an hour: wait for the burst's gaps only
        ([119.6] * 10, 0.0),  # every two minutes at 12 DCU: a restart is cheaper than 2 minutes idle
        ([60.0], 60.0),  # a tie between waiting and a restart: wait (the request comes sooner)
    ],
)
def test_the_prediction_is_the_threshold_that_would_have_cost_least(
    gaps: list[float], threshold: float
) -> None:
    assert predicted_threshold(gaps, DATAPROC) == threshold


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0, 500, allow_nan=False), max_size=40), st.floats(0.5, 24))
def test_the_prediction_matches_a_brute_force_search(gaps: list[float], idle_dcu: float) -> None:
    costs = dataclasses.replace(DATAPROC, idle_dcu=idle_dcu)
    best, _ = brute_force_threshold(gaps, costs)
    chosen = predicted_threshold(gaps, costs)
    total = sum(gap_cost(g, None if g <= chosen else chosen, costs) for g in gaps)
    assert total == pytest.approx(best, rel=1e-9, abs=1e-6)


# -- the threshold and the decision -------------------------------------------------------------------


def test_with_no_history_the_first_driver_leaves_at_once() -> None:
    # The one-restart allowance covers the worst case (a request right after it left).
    assert idle_threshold(History(), DATAPROC) == 0.0
    assert stay_decision(DriverView(0, idle_since=40.4), History(), DATAPROC, now=40.4) == Leave(
        "rent-or-buy"
    )


def test_a_driver_stays_until_its_threshold_then_leaves() -> None:
    history = History(gaps=(5.0, 10.0, 20.0))
    driver = DriverView(started_at=0, idle_since=100)
    assert stay_decision(driver, history, DATAPROC, now=100) == Stay(until=120)
    assert stay_decision(driver, history, DATAPROC, now=119.9) == Stay(until=120)
    assert stay_decision(driver, history, DATAPROC, now=120) == Leave("rent-or-buy")


def test_where_idle_costs_nothing_a_driver_waits_its_max_idle_and_an_extra_one_a_start_up() -> None:
    laptop = laptop_costs(max_idle_seconds=300, max_lifetime_seconds=3600)
    assert laptop.break_even_seconds == math.inf
    assert idle_threshold(History(), laptop) == 300  # with no history, where Dataproc's leaves at once
    assert idle_threshold(History(gaps=(3600.0,) * 5), laptop) == 300
    assert idle_threshold(History(), laptop, rank=1) == laptop.startup_seconds
    driver = DriverView(started_at=0, idle_since=100)
    assert stay_decision(driver, History(), laptop, now=399) == Stay(until=400)
    assert stay_decision(driver, History(), laptop, now=400) == Leave("max idle")


def test_every_driver_main_price_list_is_a_policy_and_emrs_comes_to_dataprocs_figures() -> None:
    assert set(PRICES) == {"dataproc", "emr", "laptop"}
    emr = PRICES["emr"](300, 3600)
    assert emr == PRICES["dataproc"](300, 3600)  # docs/DRIVER.md, "On EMR Serverless"
    assert (emr.restart_cost, emr.break_even_seconds) == (720, 60)
    assert PRICES["laptop"](300, 3600).break_even_seconds == math.inf


def test_a_working_driver_is_asked_again_when_idle() -> None:
    assert stay_decision(DriverView(0, idle_since=None), History(), DATAPROC, now=10) == Stay(until=None)


def test_without_slack_the_threshold_is_the_break_even_whatever_the_prediction() -> None:
    spent = History(gaps=(3600.0,) * 5, shortfall=R)  # predicts "leave at once"
    assert idle_threshold(spent, DATAPROC) == B
    overdrawn = History(gaps=(1.0,) * 5, shortfall=2 * R)  # predicts 1 s
    assert idle_threshold(overdrawn, DATAPROC) == B


def test_the_slack_bounds_how_far_the_threshold_moves_from_the_break_even() -> None:
    half = History(gaps=(3600.0,) * 5, shortfall=R / 2)  # slack 360 DCU-s: 30 s either way
    assert idle_threshold(half, DATAPROC) == B - 30
    long_gaps = History(gaps=(100.0,) * 5, shortfall=R / 2)  # waiting 100 s would have paid at 4 DCU
    assert idle_threshold(long_gaps, dataclasses.replace(DATAPROC, idle_dcu=4)) == 100.0
    assert idle_threshold(long_gaps, DATAPROC) == B - 30  # at 12 DCU it would not: leave early


def test_max_idle_cuts_the_threshold_and_says_so() -> None:
    costs = dataclasses.replace(DATAPROC, max_idle_seconds=15)
    history = History(gaps=(5.0, 10.0, 20.0))
    assert idle_threshold(history, costs) == 15
    assert stay_decision(DriverView(0, idle_since=100), history, costs, now=115) == Leave("max idle")
    assert stay_decision(DriverView(0, idle_since=100), History(gaps=(5.0,)), costs, now=105) == Leave(
        "rent-or-buy"
    )


def test_max_lifetime_stops_new_work_and_ends_the_idle_wait() -> None:
    history = History(gaps=(150.0,) * 3)
    costs = dataclasses.replace(DATAPROC, idle_dcu=4)  # would wait 150 s (600 DCU-s < a restart)
    driver = DriverView(started_at=0, idle_since=3500)
    assert accepts_work(driver, costs, now=3599.9) and not accepts_work(driver, costs, now=3600)
    assert stay_decision(driver, history, costs, now=3500) == Stay(until=3600)
    assert stay_decision(driver, history, costs, now=3600) == Leave("max lifetime")
    # Past it, a driver that just finished its last jobs leaves at once, whatever the rule says.
    assert stay_decision(DriverView(0, idle_since=3700), history, costs, now=3700) == Leave("max lifetime")


def test_an_extra_driver_waits_one_start_up_then_leaves_first() -> None:
    history = History(gaps=(100.0,) * 5)
    costs = dataclasses.replace(DATAPROC, idle_dcu=4)  # the oldest would wait 100 s
    oldest, extra = DriverView(0, idle_since=500, rank=0), DriverView(300, idle_since=500, rank=1)
    assert stay_decision(extra, history, costs, now=500) == Stay(until=560)
    assert stay_decision(extra, history, costs, now=560) == Leave("extra driver")
    assert stay_decision(oldest, history, costs, now=560) == Stay(until=600)
    assert idle_threshold(history, dataclasses.replace(costs, max_idle_seconds=30), rank=1) == 30
    # Never longer than the oldest would wait: with nothing to wait for, both leave at once.
    assert idle_threshold(History(), costs, rank=1) == 0


# -- scale-out ------------------------------------------------------------------------------------------


def test_the_first_request_starts_a_driver_and_an_empty_queue_none() -> None:
    assert scale_out(QueueView(1, oldest_since=0.0), [], DATAPROC, now=0) == 1
    assert scale_out(QueueView(0), [], DATAPROC, now=0) == 0


def test_a_retiring_drivers_successor_starts_on_the_next_request() -> None:
    retiring = DriverView(started_at=0, idle_since=None)  # past its lifetime, finishing a job
    assert scale_out(QueueView(1, oldest_since=3700.0), [retiring], DATAPROC, now=3700) == 1
    assert scale_out(QueueView(0), [retiring], DATAPROC, now=3700) == 0


def test_another_driver_starts_when_requests_wait_longer_than_a_start_up_and_would_still_wait() -> None:
    busy = [DriverView(0, idle_since=None)]
    long_jobs = QueueView(10, oldest_since=100.0, job_seconds=30)  # 300 s of work queued
    assert scale_out(long_jobs, busy, DATAPROC, now=160) == 0  # waited exactly a start-up
    assert scale_out(long_jobs, busy, DATAPROC, now=160.1) == 1
    short_jobs = QueueView(10, oldest_since=100.0, job_seconds=5)  # drained in 50 s: no help
    assert scale_out(short_jobs, busy, DATAPROC, now=200) == 0
    unknown = QueueView(10, oldest_since=100.0)  # no measure yet: the wait alone decides
    assert scale_out(unknown, busy, DATAPROC, now=200) == 1


def test_one_start_at_a_time_and_never_past_max_drivers() -> None:
    queue = QueueView(50, oldest_since=0.0, job_seconds=30)
    starting = [DriverView(0, idle_since=None), DriverView(90, idle_since=None, rank=1, starting=True)]
    assert scale_out(queue, starting, DATAPROC, now=100) == 0
    full = [DriverView(i, idle_since=None, rank=i) for i in range(4)]
    assert scale_out(queue, full, DATAPROC, now=100) == 0
    assert scale_out(queue, full[:3], DATAPROC, now=100) == 1
    # A retiring driver does not count against the limit: its successor may start.
    retiring = [DriverView(-4000, idle_since=None), *full[1:]]
    assert scale_out(queue, retiring, DATAPROC, now=100) == 1


# -- the ledger -----------------------------------------------------------------------------------------


def test_the_ledger_earns_twice_the_optimum_minus_what_was_spent_capped_at_one_restart() -> None:
    fresh = History()
    assert observe(fresh, 3600, waited=0, costs=DATAPROC).shortfall == 0  # left at once: R vs 2R
    early = observe(fresh, 10, waited=0, costs=DATAPROC)  # left, and a request came 10 s later
    assert early.shortfall == R - 2 * 120
    assert observe(early, 10, waited=None, costs=DATAPROC).shortfall == R - 3 * 120  # 2x120 - 120
    assert observe(early, 3600, waited=60, costs=DATAPROC).shortfall == R - 2 * 120  # 2R - 2R
    assert observe(fresh, 30, waited=None, costs=DATAPROC).gaps == (30,)
    with pytest.raises(ValueError, match="0 <= waited <= gap"):
        observe(fresh, 10, waited=11, costs=DATAPROC)


def test_the_history_keeps_the_recent_gaps_only() -> None:
    history = History()
    for gap in range(1, 40):
        history = observe(history, float(gap), None, DATAPROC)
    assert history.gaps == tuple(float(g) for g in range(8, 40))


def test_gaps_are_measured_on_a_driver_that_never_leaves_not_after_a_start_up() -> None:
    history = arrived(History(), at=0, job_seconds=1, waited=None, costs=DATAPROC)
    assert history.finished_at == 1 and history.gaps == ()
    # The first driver took 60 s to start, so really it went idle at 61; the gap is still 119 s.
    history = arrived(history, at=120, job_seconds=1, waited=0, costs=DATAPROC)
    assert history.gaps == (119,) and history.finished_at == 121
    # Requests that come while that driver would still be at work end no gap.
    history = arrived(history, at=120.5, job_seconds=1, waited=None, costs=DATAPROC)
    assert history.gaps == (119,) and history.finished_at == 122
    with pytest.raises(ValueError, match="job_seconds >= 0"):
        arrived(history, at=130, job_seconds=-1, waited=None, costs=DATAPROC)


# -- the bound --------------------------------------------------------------------------------------------


def play(gaps: list[float | str], costs: PolicyCosts) -> tuple[float, float, int, int]:
    """The cost model on a gap sequence, the policy deciding: (spent, offline optimum, gaps cut short
    by max idle, requests). A gap given as "after"/"at" is chosen by an adversary that sees the
    threshold: just after it (the worst case), or exactly on it."""
    history, spent, optimum, cut = History(), costs.restart_cost, costs.restart_cost, 0
    for given_gap in gaps:
        threshold = idle_threshold(history, costs)
        unbounded = idle_threshold(history, dataclasses.replace(costs, max_idle_seconds=math.inf))
        cut += threshold < unbounded
        if given_gap == "after":
            gap = threshold + 1e-6 * (1 + threshold)
        elif given_gap == "at":
            gap = threshold
        else:
            assert isinstance(given_gap, float)
            gap = given_gap
        waited = None if gap <= threshold else threshold
        spent += gap_cost(gap, waited, costs)
        optimum += optimal_gap_cost(gap, costs)  # offline, per gap: wait through it or restart
        history = observe(history, gap, waited, costs)
    return spent, optimum, cut, len(gaps) + 1


costs_strategy = st.builds(
    lambda dcu, idle, startup, minimum: PolicyCosts(
        dcu=dcu,
        idle_dcu=idle,
        startup_seconds=startup,
        min_billed_seconds=minimum,
        max_idle_seconds=math.inf,
        max_lifetime_seconds=math.inf,
        max_drivers=1,
    ),
    st.floats(1, 64),
    st.floats(0.5, 64),
    st.floats(1, 300),
    st.floats(0, 120),
)
gap_strategy = st.one_of(st.floats(0, 7200, allow_nan=False), st.sampled_from(["after", "at"]))


@settings(max_examples=400, deadline=None)
@given(costs_strategy, st.lists(gap_strategy, max_size=60))
def test_the_policy_never_spends_more_than_twice_the_offline_optimum(
    costs: PolicyCosts, gaps: list[float | str]
) -> None:
    spent, optimum, cut, _ = play(gaps, costs)
    assert cut == 0
    assert spent <= 2 * optimum * (1 + 1e-9)


def test_an_adversary_that_always_comes_just_after_the_threshold_gets_at_most_twice() -> None:
    spent, optimum, _, _ = play(["after"] * 200, DATAPROC)
    assert spent <= 2 * optimum * (1 + 1e-9)
    assert spent > 1.5 * optimum  # it does hurt: the bound is not slack here


@settings(max_examples=300, deadline=None)
@given(costs_strategy, st.floats(0, 1), st.lists(gap_strategy, max_size=60))
def test_a_max_idle_below_the_break_even_costs_at_most_one_restart_per_gap_it_cuts(
    costs: PolicyCosts, fraction: float, gaps: list[float | str]
) -> None:
    costs = dataclasses.replace(costs, max_idle_seconds=fraction * 2 * costs.break_even_seconds)
    spent, optimum, cut, _ = play(gaps, costs)
    assert spent <= (2 * optimum + cut * costs.restart_cost) * (1 + 1e-9)


@settings(max_examples=300, deadline=None)
@given(costs_strategy, st.floats(0.5, 1), st.lists(gap_strategy, max_size=60))
def test_a_max_idle_at_or_above_the_break_even_keeps_the_bound_exact(
    costs: PolicyCosts, fraction: float, gaps: list[float | str]
) -> None:
    # It only cuts thresholds above B, whose worst case |R - r x T| it lowers.
    costs = dataclasses.replace(costs, max_idle_seconds=fraction * 2 * costs.break_even_seconds)
    spent, optimum, _, _ = play(gaps, costs)
    assert spent <= 2 * optimum * (1 + 1e-9)


@settings(max_examples=300, deadline=None)
@given(costs_strategy, st.lists(st.floats(1.0001, 50), max_size=60))
def test_on_a_trickle_it_costs_exactly_one_job_per_request(costs: PolicyCosts, factors: list[float]) -> None:
    # Every gap longer than the break-even: per-job (a restart per request) is the optimum, and
    # the policy leaves at once from the first request on.
    gaps: list[float | str] = [f * costs.break_even_seconds for f in factors]
    spent, optimum, _, requests = play(gaps, costs)
    per_job = requests * costs.restart_cost
    assert spent == pytest.approx(per_job) and optimum == pytest.approx(per_job)


def test_a_request_known_to_be_coming_keeps_the_oldest_up_for_the_break_even() -> None:
    # No history predicts "leave at once"; a job that said more of its table's backlog waits
    # behind it makes the next gap known to be short: the oldest waits B (never worse than 2x).
    awaited = DriverView(0, idle_since=100, awaited=True)
    assert stay_decision(awaited, History(), DATAPROC, now=100) == Stay(until=100 + B)
    assert stay_decision(awaited, History(), DATAPROC, now=100 + B) == Leave("rent-or-buy")
    assert stay_decision(DriverView(0, idle_since=100), History(), DATAPROC, now=100) == Leave("rent-or-buy")
    # Max idle still bounds the wait; an extra driver is not held.
    short = dataclasses.replace(DATAPROC, max_idle_seconds=30)
    assert stay_decision(awaited, History(), short, now=100) == Stay(until=130)
    extra = DriverView(0, idle_since=100, rank=1, awaited=True)
    assert stay_decision(extra, History(), DATAPROC, now=100) == Leave("extra driver")
