"""A fake Android phone behind an MCP server that speaks like Mobile MCP (@mobilenext/mobile-mcp): the same tool
names and arguments, over stdio, on the real `mcp` SDK. The phone has a home screen and a Google Home app with
a Nest thermostat (the thermostat example of the Unified Jorbs seed).

The phone's state lives in the JSON file named by $FAKE_PHONE_STATE, so a test can set it up and check it:
    {"screen": "home", "heat": 66, "cool": 72, "indoor": 68, "log": [...], "notifications": ["SMS from ..."]}
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

DEVICE = "emulator-5554"
HOME_APP = "com.google.android.apps.chromecast.app"
READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
ACT = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=True)

# (label, x, y) of the thermostat screen's buttons
BUTTONS = {"Heat down": (100, 1200), "Heat up": (300, 1200), "Cool down": (700, 1200), "Cool up": (900, 1200)}

server = FastMCP("fake-phone", log_level="WARNING")


def _path() -> Path:
    return Path(os.environ["FAKE_PHONE_STATE"])


def _load() -> dict:
    p = _path()
    state = json.loads(p.read_text()) if p.exists() else {}
    state.setdefault("screen", "home")
    state.setdefault("heat", 66)
    state.setdefault("cool", 72)
    state.setdefault("indoor", 68)
    state.setdefault("log", [])
    return state


def _save(state: dict) -> None:
    _path().write_text(json.dumps(state, indent=1))


def _check(device: str) -> None:
    if device != DEVICE:
        raise ValueError(f'Device "{device}" not found. Use the mobile_list_available_devices tool to see available devices.')


@server.tool(annotations=READ)
def mobile_list_available_devices() -> str:
    """List all available devices."""
    return json.dumps({"devices": [{"id": DEVICE, "name": "Pixel 8", "platform": "android", "type": "emulator",
                                    "version": "15", "state": "online"}]})


@server.tool(annotations=READ)
def mobile_list_apps(device: str) -> str:
    """List all the installed apps on the device."""
    _check(device)
    return f"Found these apps on device: Google Home ({HOME_APP}), Settings (com.android.settings)"


@server.tool(annotations=ACT)
def mobile_launch_app(device: str, packageName: str) -> str:
    """Launch an app on mobile device."""
    _check(device)
    state = _load()
    if packageName != HOME_APP:
        raise ValueError(f"app {packageName} is not installed")
    state["screen"] = "thermostat"
    state["log"].append(f"launch {packageName}")
    _save(state)
    return f"Launched app {packageName}"


@server.tool(annotations=READ)
def mobile_list_elements_on_screen(device: str) -> str:
    """List elements on screen with their coordinates and display text."""
    _check(device)
    state = _load()
    if state["screen"] == "home":
        lines = ['@e1 "Google Home" (180, 1500)', '@e2 "Settings" (540, 1500)', '@e3 "12:30" (540, 40)']
        lines += [f'@n{i} "{note}" (540, {100 + 60 * i})' for i, note in enumerate(state.get("notifications", []))]
        return "\n".join(lines)
    lines = ['@e1 "Living Room Thermostat" (540, 200)', f'@e2 "Indoor {state["indoor"]}°F" (540, 400)',
             f'@e3 "Heat {state["heat"]}°F" (300, 800)', f'@e4 "Cool {state["cool"]}°F" (780, 800)']
    for i, (label, (x, y)) in enumerate(BUTTONS.items(), start=5):
        lines.append(f'@e{i} "{label}" ({x}, {y})')
    return "\n".join(lines)


@server.tool(annotations=ACT)
def mobile_click_on_screen_at_coordinates(device: str, x: float, y: float) -> str:
    """Click on the screen at given x,y coordinates."""
    _check(device)
    state = _load()
    state["log"].append(f"tap {x:g},{y:g}")
    if state["screen"] == "home" and abs(x - 180) < 60 and abs(y - 1500) < 60:
        state["screen"] = "thermostat"
    elif state["screen"] == "thermostat":
        for label, (bx, by) in BUTTONS.items():
            if abs(x - bx) < 60 and abs(y - by) < 60:
                key = "heat" if label.startswith("Heat") else "cool"
                state[key] += 1 if label.endswith("up") else -1
                if state["heat"] > state["cool"] - 2:  # the app keeps a 2° gap, as real thermostats do
                    state[key] -= 1 if label.endswith("up") else -1
    _save(state)
    return f"Clicked on screen at coordinates: {x:g}, {y:g}"


@server.tool(annotations=ACT)
def mobile_type_keys(device: str, text: str, submit: bool = False) -> str:
    """Type text into the focused element."""
    _check(device)
    state = _load()
    state["log"].append(f"type {text}")
    _save(state)
    return f"Typed text: {text}"


@server.tool(annotations=ACT)
def mobile_press_button(device: str, button: str) -> str:
    """Press a button on device (BACK, HOME, ...)."""
    _check(device)
    state = _load()
    if button.upper() in ("HOME", "BACK"):
        state["screen"] = "home"
    state["log"].append(f"press {button}")
    _save(state)
    return f"Pressed the button: {button}"


@server.tool(annotations=ACT)
def mobile_open_url(device: str, url: str) -> str:
    """Open a URL in the device's browser."""
    _check(device)
    state = _load()
    state["log"].append(f"open {url}")
    _save(state)
    return f"Opened URL: {url}"


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
def mobile_uninstall_app(device: str, packageName: str) -> str:
    """Uninstall an app from mobile device."""
    raise ValueError("the fake phone does not uninstall apps")


if __name__ == "__main__":
    server.run()
