"""App tools: the package manager and activity manager of the phone, in ``state/apps.json``.

``store`` is what the app store offers, ``installed`` what the phone has,
``running`` each running app's in-memory state (a draft, a position) and
``foreground`` the app on screen. Installing and launching are put operations;
uninstalling and force-stopping are logged in ``log`` with the call id as
``ref`` (as Android logs "Force stopping ..."), and an uninstall of an app that
is not there is refused and logged, so a replayed removal shows in the world.
"""

from __future__ import annotations

from typing import Any

from killpoint.fake_tools.schema import obj
from killpoint.fake_tools.tools._areas import (
    SHORT,
    Args,
    Refused,
    State,
    logged_tool,
    pick,
    reader,
    setter,
)

DEFAULT_APPS: State = {"store": {}, "installed": {}, "running": {}, "foreground": None, "log": []}
PACKAGE = obj({"package": SHORT})


@reader("app_list", family="app", area="apps", default=DEFAULT_APPS)
def app_list(state: State, args: Args) -> list[dict[str, Any]]:
    return [{"package": package, "label": info.get("label", package), "version": info.get("version"),
             "running": package in state["running"]}
            for package, info in sorted(state["installed"].items())]


@reader("app_info", family="app", area="apps", default=DEFAULT_APPS, schema=PACKAGE)
def app_info(state: State, args: Args) -> dict[str, Any]:
    info = pick(state["installed"], args["package"], "installed app")
    return {**info, "package": args["package"], "running": args["package"] in state["running"],
            "foreground": state["foreground"] == args["package"]}


@setter("app_install", family="app", area="apps", default=DEFAULT_APPS, schema=PACKAGE, effect="app_installed")
def app_install(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    """Install (or reinstall) the store's current version: installing twice leaves one install."""
    offer = pick(state["store"], args["package"], "app in the store")
    return state["installed"], args["package"], {"label": offer.get("label", args["package"]),
                                                  "version": offer.get("version", "1.0")}


@setter("app_launch", family="app", area="apps", default=DEFAULT_APPS, schema=PACKAGE, effect="app_launched")
def app_launch(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    """Bring the app to the foreground; a running app keeps its state (single instance)."""
    pick(state["installed"], args["package"], "installed app")
    state["running"].setdefault(args["package"], {})
    return state, "foreground", args["package"]


def _stop(state: State, package: str) -> Any:
    """End the app's process: its in-memory state (returned) is gone, and it leaves the screen."""
    if state["foreground"] == package:
        state["foreground"] = None
    return state["running"].pop(package, None)


@logged_tool("app_uninstall", family="app", area="apps", default=DEFAULT_APPS, schema=PACKAGE,
             effect="app_uninstalled")
def app_uninstall(state: State, args: Args) -> tuple[dict[str, Any], str]:
    package = args["package"]
    if package not in state["installed"]:
        raise Refused(f"uninstall {package!r}: not installed", op="uninstall", package=package)
    del state["installed"][package]
    _stop(state, package)
    return {"op": "uninstall", "package": package}, f"uninstalled {package}"


@logged_tool("app_force_stop", family="app", area="apps", default=DEFAULT_APPS, schema=PACKAGE,
             effect="app_force_stopped")
def app_force_stop(state: State, args: Args) -> tuple[dict[str, Any], str]:
    """Kill the app and drop its in-memory state; like ``am force-stop``, a stopped app is stopped again."""
    package = args["package"]
    pick(state["installed"], package, "installed app")
    lost = _stop(state, package)
    return {"op": "force_stop", "package": package, "lost_state": lost}, f"stopped {package}"
