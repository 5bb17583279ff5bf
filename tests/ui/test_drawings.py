"""Where the lineage graph and the timeline draw things (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from turnstile.ops.lineage_graph import Edge, Graph, Node
from turnstile.ops.timeline import Span
from turnstile.ui import graph, timeline

T0 = datetime(2024, 5, 1, 10, tzinfo=UTC)


def node(prefix: str) -> Node:
    return Node(prefix, prefix.replace("/", "."), "IDLE", None, False)


def edge(source: str, dependent: str, waits: datetime | None = None) -> Edge:
    return Edge(source, dependent, T0, waits, timedelta(0))


def test_each_table_sits_one_column_right_of_its_deepest_source() -> None:
    drawn = Graph(
        tuple(node(p) for p in ("s/a", "s/b", "m/x", "m/y")),
        (edge("s/a", "m/x"), edge("s/b", "m/x"), edge("m/x", "m/y"), edge("s/a", "m/y")),
        (),
    )
    assert graph.columns(drawn) == {"s/a": 0, "s/b": 0, "m/x": 1, "m/y": 2}
    laid = graph.layout(drawn)
    at = {p.node.prefix: p for p in laid.nodes}
    assert at["m/y"].x > at["m/x"].x > at["s/a"].x == at["s/b"].x
    first = next(e for e in laid.edges if e.edge.source == "s/a" and e.edge.dependent == "m/x")
    assert first.path.startswith(f"M{at['s/a'].x + graph.BOX_W:.0f},")  # from the source's right side
    assert laid.width >= at["m/y"].x + graph.BOX_W and laid.height >= graph.BOX_H


def test_a_waiting_edge_is_marked_and_a_cycle_does_not_loop() -> None:
    drawn = Graph((node("a/a"), node("b/b")), (edge("a/a", "b/b", waits=T0), edge("b/b", "a/a")), ())
    laid = graph.layout(drawn)
    assert sorted(e.waiting for e in laid.edges) == [False, True]
    assert set(graph.columns(drawn).values()) == {0, 1}


def test_a_batch_row_runs_from_its_arrival_through_its_job_to_its_commit() -> None:
    spans = [
        Span("h/10", 1, "COMMITTED", T0, T0 + timedelta(minutes=5), T0 + timedelta(minutes=6)),
        Span("h/11", 2, "DROPPED", T0 + timedelta(minutes=7), None, T0 + timedelta(minutes=20)),
        Span("h/12", 3, "RUNNING", T0 + timedelta(minutes=8), T0 + timedelta(minutes=25), None),
        Span("h/13", None, "QUEUED", T0 + timedelta(minutes=9), None, None),
    ]
    now = T0 + timedelta(minutes=30)
    drawn = timeline.draw(spans, now)
    committed, dropped, running, queued = drawn.rows
    assert committed.wait is not None and committed.job is not None
    assert committed.wait[0] == drawn.plot_x  # the first arrival starts the axis
    assert committed.wait[1] == committed.job[0]
    assert dropped.job is None and dropped.mark is not None
    assert running.job is not None and running.job[1] == drawn.plot_x + timeline.PLOT_W  # up to now
    assert queued.job is None and queued.mark is not None and queued.mark < running.job[0]
    assert [r.y for r in drawn.rows] == sorted(r.y for r in drawn.rows)
    assert 2 <= len(drawn.ticks) <= 6
    assert all(drawn.plot_x <= t.x <= drawn.plot_x + timeline.PLOT_W for t in drawn.ticks)


def test_ticks_stay_few_over_years() -> None:
    found = timeline.ticks(T0, T0 + timedelta(days=900), 0)
    assert 1 <= len(found) <= 6
    assert all(len(t.label) == 10 for t in found)  # whole dates
