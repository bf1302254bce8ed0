"""Device tools: display, alarms, media, ringing and the phone's read-only sensors.

Areas: ``display`` (brightness is a put), ``alarms`` (every call creates an
alarm whose id is the call id), ``media`` (a playlist, a position, play/pause,
a media-session ``log`` and the player's ``recent`` plays, both stamped with
the call id), ``ring`` (each ring logged), and read-only ``location``,
``battery``, ``network``, ``radio``, ``storage``. Nothing reads a real clock or
a real random source, so a crashed run and its golden run leave equal worlds.
"""

from __future__ import annotations

import hashlib
import os
import re
import string
from typing import Any

from killpoint.fake_tools.base import ToolContext, ToolFailed, fake_tool
from killpoint.fake_tools.schema import BOOLEAN, NAME, obj
from killpoint.fake_tools.tools._areas import (
    NO_ARGS,
    Args,
    State,
    area_view,
    bounded,
    enum,
    load_area,
    logged_tool,
    setter,
)

DEFAULT_DISPLAY: State = {"brightness": 128, "auto_brightness": False, "resolution": "1080x2400", "refresh_hz": 60}
DEFAULT_ALARMS: State = {"alarms": []}
DEFAULT_MEDIA: State = {"playlist": ["Morning", "Commute", "Focus"], "position": 0, "playing": False,
                        "log": [], "recent": []}
DEFAULT_RING: State = {"rings": []}
SENSORS: dict[str, State] = {
    "location": {"latitude": 48.8566, "longitude": 2.3522, "accuracy_m": 12},
    "battery": {"level": 76, "charging": False, "health": "good"},
    "network": {"type": "wifi", "ssid": "home", "connected": True, "airplane_mode": False},
    "radio": {"cellular": "LTE", "signal_dbm": -95, "bluetooth": True, "nfc": False},
}
DEFAULT_STORAGE: State = {"total_bytes": 128 * 10**9, "system_bytes": 12 * 10**9}


for _area, _tool in (("location", "get_location"), ("battery", "battery"), ("network", "network"),
                     ("radio", "radio")):
    area_view(_tool, family="device", area=_area, default=SENSORS[_area])
display = area_view("display", family="device", area="display", default=DEFAULT_DISPLAY)


@setter("brightness", family="device", area="display", default=DEFAULT_DISPLAY,
        schema=obj({"level": bounded(0, 255)}), effect="brightness_set")
def brightness(state: State, args: Args) -> tuple[dict[str, Any], str, Any]:
    return state, "brightness", args["level"]


@fake_tool("storage", family="device", schema=NO_ARGS)
def storage(ctx: ToolContext, args: Args) -> dict[str, int]:
    """Capacity from ``state/storage.json``; used space is what the world's files really take."""
    capacity = load_area(ctx.world, "storage", DEFAULT_STORAGE)
    used = sum(os.lstat(os.path.join(folder, name)).st_size
               for folder, _, names in os.walk(ctx.world.files_root) for name in names)
    used += int(capacity["system_bytes"])
    return {"total_bytes": int(capacity["total_bytes"]), "used_bytes": used,
            "free_bytes": max(0, int(capacity["total_bytes"]) - used)}


def _alarms(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("alarms", [])


@logged_tool("alarm", family="device", area="alarms", default=DEFAULT_ALARMS, effect="alarm_created",
             entries=_alarms, schema=obj({"time": {"type": "string", "minLength": 4, "maxLength": 5}},
                                         {"label": {"type": "string", "maxLength": 100}}))
def alarm(state: State, args: Args) -> tuple[dict[str, Any], str]:
    """Create an alarm (HH:MM); its id, shown in the alarm list, is the call id."""
    match = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", args["time"])
    if match is None:
        raise ToolFailed(f"alarm: time {args['time']!r} is not HH:MM (00:00 to 23:59)")
    time = f"{int(match.group(1)):02d}:{match.group(2)}"
    return {"time": time, "label": args.get("label", ""), "enabled": True}, f"alarm set for {time}"


@logged_tool("control_media", family="device", area="media", default=DEFAULT_MEDIA, effect="media_controlled",
             schema=obj({"action": enum("play_pause", "next", "previous")}))
def control_media(state: State, args: Args) -> tuple[dict[str, Any], dict[str, Any]]:
    """play_pause toggles; next/previous move through the playlist (wrapping)."""
    if args["action"] == "play_pause":
        state["playing"] = not state["playing"]
    elif state["playlist"]:
        step = 1 if args["action"] == "next" else -1
        state["position"] = (state["position"] + step) % len(state["playlist"])
    return {"op": args["action"]}, {"playing": state["playing"], "position": state["position"]}


def _recent(state: State, args: Args) -> list[dict[str, Any]]:
    return state.setdefault("recent", [])


@logged_tool("music", family="device", area="media", default=DEFAULT_MEDIA, effect="track_played",
             entries=_recent, schema=obj({"track": NAME}))
def music(state: State, args: Args) -> tuple[dict[str, Any], str]:
    """Play a playlist track from its start; the player's "recently played" list gains an entry each time."""
    if args["track"] not in state["playlist"]:
        raise ToolFailed(f"music: no track {args['track']!r} in the playlist {state['playlist']}")
    state["position"] = state["playlist"].index(args["track"])
    state["playing"] = True
    return {"track": args["track"]}, f"playing {args['track']}"


@logged_tool("ring", family="device", area="ring", default=DEFAULT_RING, effect="phone_rang",
             entries=lambda state, args: state.setdefault("rings", []), schema=obj({}, {"seconds": bounded(1, 60)}))
def ring(state: State, args: Args) -> tuple[dict[str, Any], str]:
    return {"seconds": args.get("seconds", 5)}, f"rang for {args.get('seconds', 5)} s"


@fake_tool("password", family="device", schema=obj({}, {"length": bounded(8, 64), "symbols": BOOLEAN}))
def password(ctx: ToolContext, args: Args) -> str:
    """A password derived from the call id and arguments: stored nowhere, the same on a retry."""
    alphabet = string.ascii_letters + string.digits + ("!#$%&*+-=?@^_" if args.get("symbols", True) else "")
    seed = hashlib.sha256(f"{ctx.call}:{sorted(args.items())}".encode()).digest() * 2
    return "".join(alphabet[byte % len(alphabet)] for byte in seed[: args.get("length", 16)])
