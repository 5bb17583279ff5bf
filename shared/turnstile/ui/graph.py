"""Where the lineage graph's boxes and arrows go (pure): sources on the left, each dependent one
column right of its deepest source, boxes in a column ordered near the boxes they connect to.

The SVG is drawn by the `lineage.html` template from these coordinates; nothing is fetched."""

from __future__ import annotations

from dataclasses import dataclass

from turnstile.ops.lineage_graph import Edge, Graph, Node

BOX_W = 230
BOX_H = 62
COLUMN_GAP = 250  # room for the edge labels between columns
LABEL_W = 200
ROW_GAP = 28
MARGIN = 20


@dataclass(frozen=True)
class PlacedNode:
    node: Node
    x: float
    y: float


@dataclass(frozen=True)
class PlacedEdge:
    edge: Edge
    path: str  # SVG path data, a cubic curve from the source's right side to the dependent's left
    label_x: float
    label_y: float
    waiting: bool


@dataclass(frozen=True)
class Layout:
    nodes: tuple[PlacedNode, ...]
    edges: tuple[PlacedEdge, ...]
    width: float
    height: float


def columns(graph: Graph) -> dict[str, int]:
    """Each folder's column: 0 for a table that depends on nothing shown, else one more than its
    deepest source's. A cycle (which turnstile refuses to run) is cut where it closes."""
    sources: dict[str, list[str]] = {n.prefix: [] for n in graph.nodes}
    for edge in graph.edges:
        sources.setdefault(edge.dependent, []).append(edge.source)
        sources.setdefault(edge.source, [])
    found: dict[str, int] = {}

    def column(prefix: str, path: frozenset[str]) -> int:
        if prefix in found:
            return found[prefix]
        deeper = [column(s, path | {prefix}) for s in sources[prefix] if s not in path]
        found[prefix] = 1 + max(deeper) if deeper else 0
        return found[prefix]

    for prefix in sorted(sources):
        column(prefix, frozenset())
    return found


def layout(graph: Graph) -> Layout:
    at = columns(graph)
    by_column: dict[int, list[Node]] = {}
    for node in sorted(graph.nodes, key=lambda n: n.prefix):
        by_column.setdefault(at[node.prefix], []).append(node)
    rows: dict[str, float] = {}
    neighbours: dict[str, list[str]] = {}
    for edge in graph.edges:
        neighbours.setdefault(edge.dependent, []).append(edge.source)
        neighbours.setdefault(edge.source, []).append(edge.dependent)
    for index in sorted(by_column):
        column = by_column[index]
        if index:  # near the boxes already placed that it connects to (barycentre)

            def centre(node: Node) -> float:
                placed = [rows[p] for p in neighbours.get(node.prefix, []) if p in rows]
                return sum(placed) / len(placed) if placed else float("inf")

            column.sort(key=lambda n: (centre(n), n.prefix))
        for row, node in enumerate(column):
            rows[node.prefix] = row
    placed = {
        node.prefix: PlacedNode(
            node,
            MARGIN + at[node.prefix] * (BOX_W + COLUMN_GAP),
            MARGIN + rows[node.prefix] * (BOX_H + ROW_GAP),
        )
        for node in graph.nodes
    }
    edges = []
    for edge in graph.edges:
        a, b = placed.get(edge.source), placed.get(edge.dependent)
        if a is None or b is None:
            continue
        x1, y1 = a.x + BOX_W, a.y + BOX_H / 2
        x2, y2 = b.x, b.y + BOX_H / 2
        bend = max((x2 - x1) / 2, 40)
        path = f"M{x1:.0f},{y1:.0f} C{x1 + bend:.0f},{y1:.0f} {x2 - bend:.0f},{y2:.0f} {x2:.0f},{y2:.0f}"
        edges.append(PlacedEdge(edge, path, (x1 + x2) / 2, (y1 + y2) / 2, edge.waits_for is not None))
    width = max((p.x + BOX_W for p in placed.values()), default=0) + MARGIN
    height = max((p.y + BOX_H for p in placed.values()), default=0) + MARGIN
    return Layout(tuple(placed.values()), tuple(edges), width, height)
