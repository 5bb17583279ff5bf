"""The console's web application (Starlette): pages rendered on the server from Jinja templates,
a little plain JavaScript to refresh the tables and copy commands, nothing from the internet.

The tables page and the lineage graph are served from the last reading of every table, which the
console renews in the background (`snapshot`), or say how far the reading under way has got (the
first one, or one after the last grew too old) and fetch their part again until it is done; a
table's page, an action's confirmation and the action itself read the table afresh, and the table
read after an action replaces its row.

Routes: `/` the tables (and `/fragment/tables`, their rows alone, for the refresh), `/table/<folder>`
one table, `/lineage` the `depends_on` graph (and `/fragment/lineage`, its content alone, fetched
while the tables are read), `/confirm/<action>` what an action will do, and `POST /act/<action>`
doing it. Every request passes `security.Guard` first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from turnstile.core import logs
from turnstile.names.paths import Table
from turnstile.ops import render
from turnstile.ops import status as status_ops
from turnstile.ops.errors import Refused
from turnstile.ui import actions, graph, pages, security
from turnstile.ui.context import Console
from turnstile.ui.snapshot import Partial, Snapshot

HERE = Path(__file__).parent
log = logs.get("ui")

HEALTH_CLASS = {
    "UNREADABLE": "bad",
    "BLOCKED": "bad",
    "FAILED": "bad",
    "STALLED": "warn",
    "RETRYING": "warn",
    "WAITING": "wait",
    "GATED": "wait",
    "PAUSED": "wait",
    "RUNNING": "busy",
    "QUEUED": "busy",
    "IDLE": "ok",
}
OUTCOME_CLASS = {
    "COMMITTED": "ok",
    "REPROCESSED": "busy",
    "REBUILT": "busy",
    "PUBLISHED_OVERRIDE": "warn",
    "SKIPPED": "wait",
    "FAILED": "bad",
    "BLOCKED": "bad",
    "UNREADABLE": "bad",
    "DROPPED": "warn",
    "RUNNING": "busy",
    "QUEUED": "wait",
}


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(["html", "svg"], default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["age"] = lambda seconds: render.age(seconds) or "-"
    env.filters["when"] = lambda at: at.strftime("%Y-%m-%d %H:%M:%S") if at else "-"
    env.filters["minute"] = lambda at: at.strftime("%Y-%m-%d %H:%M") if at else "-"  # the graph's labels
    env.filters["query"] = lambda params: urlencode({k: v for k, v in params.items() if v not in (None, "")})
    env.globals["held_for"] = pages.held_for
    env.globals["health_class"] = lambda word: HEALTH_CLASS.get(str(word), "wait")
    env.globals["outcome_class"] = lambda word: OUTCOME_CLASS.get(str(word), "wait")
    for name in env.list_templates(extensions=["html"]):
        env.get_template(name)  # compiled now: the first page, served while the tables are read, does not
    return env


def create_app(console: Console) -> Starlette:
    env = environment()
    snapshot = _snapshot(console)

    def page(name: str, request: Request, status_code: int = 200, **values: Any) -> HTMLResponse:
        html = env.get_template(name).render(console=console, request=request, token=console.token, **values)
        return HTMLResponse(html, status_code=status_code)

    def failure(request: Request, exc: Exception, title: str) -> HTMLResponse:
        """A page that says what went wrong as the CLI would; a bug is logged, shown and not hidden."""
        said = console.describe(exc)
        if said is None:
            log.exception("console page failed")
            said = f"{type(exc).__name__}: {exc}"
            return page("error.html", request, 500, title=title, message=said)
        return page(
            "error.html", request, 409 if isinstance(exc, Refused) else 502, title=title, message=said
        )

    async def tables(request: Request) -> Response:
        query = pages.TablesQuery.of(dict(request.query_params))
        try:
            found = await run_in_threadpool(pages.tables, snapshot, query)
        except Exception as exc:
            return failure(request, exc, "Tables")
        name = _part(request, "tables_rows.html", "tables.html")
        return page(name, request, view=found, columns=pages.COLUMNS, healths=list(pages.SEVERITY))

    async def table(request: Request) -> Response:
        prefix = request.path_params["prefix"]
        number = request.query_params.get("page", "1")
        try:
            chosen = console.table(prefix)
            found = await run_in_threadpool(
                _table_page, console, snapshot, chosen, int(number) if number.isdigit() else 1
            )
        except Exception as exc:
            return failure(request, exc, prefix)
        return page("table.html", request, view=found)

    async def lineage(request: Request) -> Response:
        try:
            found = await run_in_threadpool(pages.lineage_page, snapshot)
        except Exception as exc:
            return failure(request, exc, "Lineage")
        return page(
            _part(request, "lineage_body.html", "lineage.html"),
            request,
            view=found,
            progress=found if isinstance(found, Partial) else None,
            box_w=graph.BOX_W,
            box_h=graph.BOX_H,
            label_w=graph.LABEL_W,
        )

    async def confirm(request: Request) -> Response:
        action = actions.ACTIONS.get(request.path_params["action"])
        if action is None:
            return page("error.html", request, 404, title="No such action", message="no such action")
        if console.read_only:
            return page("error.html", request, 403, title=action.label, message=_read_only(console))
        try:
            asked = actions.Asked.of(dict(request.query_params))
            chosen = console.table(asked.table)
            preview = await run_in_threadpool(action.preview, console, chosen, asked)
        except Exception as exc:
            return failure(request, exc, action.label)
        return page("confirm.html", request, action=action, preview=preview, table=chosen, asked=asked)

    async def act(request: Request) -> Response:
        fields = security.checked_form(await request.body(), console.token)
        if fields is None:
            return page("error.html", request, 403, title="Refused", message=security.REFUSED)
        action = actions.ACTIONS.get(request.path_params["action"])
        if action is None:
            return page("error.html", request, 404, title="No such action", message="no such action")
        if console.read_only:
            return page("error.html", request, 403, title=action.label, message=_read_only(console))
        try:
            asked = actions.Asked.of(fields)
            chosen = console.table(asked.table)
            done = await run_in_threadpool(action.perform, console, chosen, asked)
        except Exception as exc:
            return failure(request, exc, action.label)
        await run_in_threadpool(_reread, console, snapshot, chosen)
        log.warning(
            "console action",
            extra={
                "event": "console_action",
                "action": action.name,
                "table": chosen.prefix,
                "rel": asked.rel,
            },
        )
        return page("done.html", request, 200 if done.ok else 409, action=action, done=done, table=chosen)

    routes = [
        Route("/", tables),
        Route("/fragment/tables", tables),
        Route("/table/{prefix:path}", table),
        Route("/lineage", lineage),
        Route("/fragment/lineage", lineage),
        Route("/confirm/{action}", confirm),
        Route("/act/{action}", act, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(security.Guard, token=console.token)],
        lifespan=_lifespan(snapshot),
    )


def _part(request: Request, fragment: str, whole: str) -> str:
    """The template of a page's part (`/fragment/...`, fetched again in place) or of the page."""
    return fragment if request.url.path.startswith("/fragment/") else whole


def _table_page(console: Console, snapshot: Snapshot, table: Table, page: int) -> pages.TablePage:
    """A table's page, read afresh; its status replaces the table's row of the tables page."""
    recent = snapshot.recent()
    found = pages.table(console, table, page, recent.configs if recent is not None else None)
    snapshot.update(found.status)
    return found


def _snapshot(console: Console) -> Snapshot:
    every, max_age = console.refresh_seconds, console.max_age_seconds
    return Snapshot(
        lambda progress: pages.read_all(console, progress),
        every=every,
        max_age=max_age,
        patience=console.patience_seconds,
    )


def _lifespan(snapshot: Snapshot) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        snapshot.start()  # the first reading begins before the first page asks for it
        yield
        snapshot.stop()

    return lifespan


def _reread(console: Console, snapshot: Snapshot, table: Table) -> None:
    """The table as the action left it replaces its row of the tables page (read afresh)."""
    try:
        snapshot.update(status_ops.table_status(console.invocation(), table))
    except Exception:  # the action is done; the next reading shows the table
        log.exception("reading the table after the action failed")


def _read_only(console: Console) -> str:
    why = console.read_only_reason or "started with --read-only"
    return f"the console is read-only ({why}): nothing can be changed from it; the CLI shows the commands"
