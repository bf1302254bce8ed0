"""Browser tools: one tab over a fake site map, in ``state/browser.json``.

``sites`` maps a URL to its page: title, text, ``links`` (id -> URL),
``buttons`` (id -> {"submits": true} or {"downloads": FILE}) and ``fields``
(id -> {"type": text|date|select|checkbox|file, "value", "options"}). ``page``
is the open page with its field values and scroll. Navigating resets the form
and replaces ``network`` (as DevTools does without "preserve log"), so going to
the same URL again changes nothing. Every interaction is logged in ``events``
stamped with the call id, in the same save as its consequence (a submission,
a download, an upload), which is how a probe tells one click from another.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable
from typing import Any

from killpoint.fake_tools.base import FakeTool, ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import NAME, PATH, TEXT, obj
from killpoint.fake_tools.tools._areas import (
    NO_ARGS,
    SHORT,
    Args,
    State,
    change,
    load_area,
    pick,
    probe_of,
    probe_ref,
    reader,
    stamp,
)
from killpoint.fake_tools.world import World

DEFAULT_BROWSER: State = {"sites": {}, "page": None, "history": [], "network": [], "downloads": [],
                          "submissions": [], "uploads": [], "events": []}
EMPTY_VALUE = {"text": "", "date": "", "select": "", "checkbox": False, "file": ""}
Interaction = Callable[[ToolContext, State, dict[str, Any], Args], Any]


def _site(state: State, url: str) -> dict[str, Any]:
    return pick(state["sites"], url, "site on the fake web")


def _page(state: State) -> tuple[dict[str, Any], dict[str, Any]]:
    """The open page and its site definition."""
    page = state["page"]
    if not isinstance(page, dict) or "url" not in page:
        raise ToolFailed("no page is open: call browser_navigate first")
    page.setdefault("fields", {})
    page.setdefault("scroll", 0)
    return page, _site(state, page["url"])


def _open(state: State, url: str) -> dict[str, Any]:
    """Load ``url`` fresh: default field values, top of the page, one GET in the network log."""
    site = _site(state, url)
    fields = site.get("fields", {})
    state["page"] = {"url": url, "scroll": 0,
                     "fields": {name: spec.get("value", EMPTY_VALUE.get(spec.get("type", "text"), ""))
                                for name, spec in fields.items()}}
    if not state["history"] or state["history"][-1] != url:
        state["history"].append(url)
    state["network"] = [{"method": "GET", "url": url, "status": 200}]
    return state["page"]


def _view(state: State) -> dict[str, Any]:
    page, site = _page(state)
    return {"url": page["url"], "title": site.get("title", ""), "text": site.get("text", ""),
            "fields": {name: {"type": spec.get("type", "text"), "value": page["fields"].get(name),
                              **({"options": spec["options"]} if "options" in spec else {})}
                       for name, spec in site.get("fields", {}).items()},
            "links": site.get("links", {}), "buttons": sorted(site.get("buttons", {})), "scroll": page["scroll"]}


@fake_tool("browser_navigate", family="browser", schema=obj({"url": SHORT}))
def browser_navigate(ctx: ToolContext, args: Args) -> dict[str, Any]:
    """Open a URL, freshly loaded; the current URL again is a reload that changes nothing."""
    change(ctx, "browser", DEFAULT_BROWSER, lambda state: _open(state, args["url"]), effect="page_loaded")
    return _view(load_area(ctx.world, "browser", DEFAULT_BROWSER))


@probe_of(browser_navigate)
def _page_open(world: World, args: Args, call: str) -> bool:
    """The address bar shows the URL, as an agent would check it."""
    page = load_area(world, "browser", DEFAULT_BROWSER)["page"]
    return isinstance(page, dict) and page.get("url") == args["url"]


def _browser_reader(name: str, view: Callable[[State], Any]) -> None:
    reader(name, family="browser", area="browser", default=DEFAULT_BROWSER, schema=NO_ARGS)(
        lambda state, args: view(state))


def _show(state: State) -> str:
    view = _view(state)
    fields = "".join(f"[{name}: {field['value']}]\n" for name, field in view["fields"].items())
    return f"{view['title']}\n{view['text']}\n{fields}" + "".join(f"<{button}>\n" for button in view["buttons"])


def _summary(state: State) -> dict[str, Any]:
    view = _view(state)
    return {"url": view["url"], "title": view["title"], "fields": len(view["fields"]),
            "filled": sorted(name for name, field in view["fields"].items() if field["value"]),
            "history": len(state["history"]), "downloads": len(state["downloads"])}


for _name, _reader in (
    ("browser_snapshot", _view),
    ("browser_show", _show),
    ("browser_screenshot", lambda state: {"url": _page(state)[0]["url"],
                                          "sha256": hashlib.sha256(_show(state).encode()).hexdigest()}),
    ("browser_debug_dump", lambda state: state),
    ("browser_network_log", lambda state: state["network"]),
    ("browser_download_list", lambda state: state["downloads"]),
    ("browser_context_summary", _summary),
):
    _browser_reader(_name, _reader)


def _events(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("events", [])


def _interaction(name: str, schema: dict[str, Any], kind: str | None = None) -> Callable[[Interaction], FakeTool]:
    """Register a NON_IDEMPOTENT page interaction logged in ``events``; ``kind`` is the field type it needs.

    ``interact(ctx, state, page, args)`` changes the open page; a field tool's
    field is checked to exist with the right type before it runs.
    """

    def wrap(interact: Interaction) -> FakeTool:
        def act(ctx: ToolContext, args: Args) -> Any:
            def mutate(state: State) -> Any:
                page, site = _page(state)
                if kind is not None:
                    spec = pick(site.get("fields", {}), args["field"], "field on this page")
                    if spec.get("type", "text") != kind:
                        raise ToolFailed(f"{name}: field {args['field']!r} is a {spec.get('type', 'text')} field, "
                                         f"not a {kind} field")
                output = interact(ctx, state, page, args)
                stamp(_events(state, args), ctx, {"op": name, **args})
                return output

            return change(ctx, "browser", DEFAULT_BROWSER, mutate, effect=f"{name}_done")

        tool = fake_tool(name, family="browser", schema=schema)(act)
        probe_ref(tool, "browser", DEFAULT_BROWSER, _events)
        return tool

    return wrap


@_interaction("browser_click", obj({"element": NAME}))
def browser_click(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> str:
    """Follow a link, submit the form (every click submits again) or start a download."""
    _, site = _page(state)
    element = args["element"]
    if element in site.get("links", {}):
        return _open(state, site["links"][element])["url"]
    button = pick(site.get("buttons", {}), element, "link or button on this page")
    if button.get("submits"):
        stamp(state["submissions"], ctx, {"url": page["url"], "form": dict(page["fields"])})
        state["network"].append({"method": "POST", "url": page["url"], "status": 201})
        return f"submitted #{len(state['submissions'])}"
    if button.get("downloads"):
        stamp(state["downloads"], ctx, {"url": page["url"], "file": button["downloads"]})
        return f"downloading {button['downloads']}"
    return "clicked"


@_interaction("browser_input", obj({"field": NAME, "text": TEXT}), kind="text")
def browser_input(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> str:
    """Type after what the field holds: a replay types the text twice."""
    page["fields"][args["field"]] = str(page["fields"].get(args["field"]) or "") + args["text"]
    return page["fields"][args["field"]]


@_interaction("browser_date_input", obj({"field": NAME, "date": {"type": "string", "minLength": 10,
                                                                  "maxLength": 10}}), kind="date")
def browser_date_input(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> str:
    try:
        page["fields"][args["field"]] = datetime.date.fromisoformat(args["date"]).isoformat()
    except ValueError:
        raise ToolFailed(f"browser_date_input: {args['date']!r} is not a date YYYY-MM-DD") from None
    return page["fields"][args["field"]]


@_interaction("browser_select", obj({"field": NAME, "option": SHORT}), kind="select")
def browser_select(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> str:
    options = _page(state)[1]["fields"][args["field"]].get("options", [])
    if args["option"] not in options:
        raise ToolFailed(f"browser_select: {args['option']!r} is not an option of {args['field']!r}: {options}")
    page["fields"][args["field"]] = args["option"]
    return args["option"]


@_interaction("browser_scroll", obj({"dy": {"type": "integer", "minimum": -10000, "maximum": 10000}}))
def browser_scroll(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> int:
    """Scroll by ``dy`` pixels from where the page is (never above its top)."""
    page["scroll"] = max(0, page["scroll"] + args["dy"])
    return page["scroll"]


@_interaction("browser_toggle", obj({"field": NAME}), kind="checkbox")
def browser_toggle(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> bool:
    page["fields"][args["field"]] = not page["fields"].get(args["field"])
    return page["fields"][args["field"]]


@_interaction("browser_file_upload", obj({"field": NAME, "path": PATH}), kind="file")
def browser_file_upload(ctx: ToolContext, state: State, page: dict[str, Any], args: Args) -> str:
    """Upload a world file: the site receives it (``uploads``) and the field shows its name."""
    target = ctx.world.path(args["path"])
    if not target.is_file():
        raise ToolFailed(f"browser_file_upload: no file {args['path']!r}")
    stamp(state["uploads"], ctx, {"url": page["url"], "field": args["field"], "name": target.name,
                                  "sha256": hashlib.sha256(target.read_bytes()).hexdigest()})
    page["fields"][args["field"]] = target.name
    return target.name
