"""Web tools: a fake web of pages and a fake HTTP service, both in ``state/web.json``.

``pages`` maps a URL to a page (title, body); ``collections`` maps an API URL
to its resources. GET only reads; POST to a collection creates a resource
numbered like a real API would and stamped with the call id as ``ref``, so a
probe can tell whether this POST already landed.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import obj
from killpoint.fake_tools.tools._areas import (
    OBJECT,
    SHORT,
    Args,
    State,
    bounded,
    change,
    enum,
    has_ref,
    load_area,
    matches,
    probe_of,
    reader,
    stamp,
)
from killpoint.fake_tools.world import World

DEFAULT_WEB: State = {"pages": {}, "collections": {}}


def _page(state: State, url: str) -> dict[str, Any]:
    page = state["pages"].get(url)
    if not isinstance(page, dict):
        raise ToolFailed(f"GET {url!r}: 404 not found on the fake web")
    return page


@reader("web_fetch", family="web", area="web", default=DEFAULT_WEB, schema=obj({"url": SHORT}))
def web_fetch(state: State, args: Args) -> dict[str, Any]:
    page = _page(state, args["url"])
    return {"url": args["url"], "title": page.get("title", ""), "body": page.get("body", "")}


@reader("web_search", family="web", area="web", default=DEFAULT_WEB,
        schema=obj({"query": SHORT}, {"limit": bounded(1, 50)}))
def web_search(state: State, args: Args) -> list[dict[str, str]]:
    hits = [{"url": url, "title": page.get("title", "")}
            for url, page in sorted(state["pages"].items())
            if isinstance(page, dict) and matches(args["query"], page.get("title", ""), page.get("body", ""))]
    return hits[: args.get("limit", 10)]


@fake_tool("http_request", family="web",
           schema=obj({"method": enum("GET", "POST"), "url": SHORT}, {"body": OBJECT}))
def http_request(ctx: ToolContext, args: Args) -> dict[str, Any]:
    """GET reads a page or a collection; POST creates a resource in a collection (and nothing else)."""
    url = args["url"]
    if args["method"] == "GET":
        state = load_area(ctx.world, "web", DEFAULT_WEB)
        if url in state["collections"]:
            return {"status": 200, "body": state["collections"][url]}
        return {"status": 200, "body": _page(state, url).get("body", "")}

    def create(state: State) -> dict[str, Any]:
        if url not in state["collections"]:
            allowed = "GET" if url in state["pages"] else "nothing"
            raise ToolFailed(f"POST {url!r}: no such collection (this URL allows {allowed})")
        resources = state["collections"][url]
        created = stamp(resources, ctx, {"id": len(resources) + 1, "body": args.get("body", {})})
        return {"status": 201, "id": created["id"]}

    return change(ctx, "web", DEFAULT_WEB, create, effect="resource_created")


@probe_of(http_request)
def _resource_created(world: World, args: Args, call: str) -> bool:
    """Only a POST leaves an effect: a resource in its collection carrying this call's ref."""
    if args["method"] != "POST":
        return False
    return has_ref(load_area(world, "web", DEFAULT_WEB)["collections"].get(args["url"]), call)
