"""Documents that are regular files of bounded size yet still past what the parsers bear: a dotted key of
100,000 parts (tomllib's time and memory grow with its square), integers past CPython's 4,300-digit conversion
limit or of 20,000 bits in hex (read, then no message can show them), values nested thousands deep (read, then
formatting one overflows the stack), and tool names no report can print. Each is refused with exit 2 naming
the file, within the deadline and the memory cap of ``test_hostile_inputs`` (a bad-input campaign,
bench/bad_inputs.py, found each as a traceback or an exhausted memory)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomli_w

from killpoint import _toml
from killpoint.harness.config import limits
from tests.test_hostile_inputs import CATALOGUE, PLAN, inputs, refused  # noqa: F401

pytestmark = pytest.mark.hostile

GOOD = tomli_w.dumps({"workload": ["true"], "plan": "plan.json", "catalogue": "catalogue.json"})
DEEP_KEY = ".".join(["a"] * 100_000)
HEX = "0x" + "f" * 5_000


@pytest.mark.parametrize(("text", "reason"), [
    (f"{DEEP_KEY} = 1\n", "a dotted key of over 64 parts"),
    (f"[{DEEP_KEY}]\n", "a dotted key of over 64 parts"),
    (f"timeout = {{ {'.'.join(['a'] * 3_000)} = 1 }}\n", "a dotted key of over 64 parts"),
    (f"timeout = {'9' * 5_000}\n", "a value that cannot be read"),
    (f"timeout = {HEX}\n", "an integer of 20000 bits"),
    (f"[world.state.latency]\nread_file = {HEX}\n", "an integer of 20000 bits"),
    (f"name = {'[' * 70}1{']' * 70}\n", "values nested over 64 levels deep"),
])
def test_a_scenario_past_what_the_parser_bears_is_refused_naming_why(inputs: Path, text: str, reason: str) -> None:
    (inputs / "scenario.toml").write_text(GOOD + text)
    err = refused("run", inputs / "scenario.toml")
    assert "scenario.toml" in err and reason in err, err


@pytest.mark.parametrize(("text", "reason"), [
    (f"[tools]\n{DEEP_KEY} = 1\n", "a dotted key of over 64 parts"),
    (f'default = "UNKNOWN"\n[tools]\nread_file = {{ class = {HEX} }}\n', "an integer of 20000 bits"),
    (f"default = {'9' * 5_000}\n", "a value that cannot be read"),
])
@pytest.mark.parametrize("command", [("catalogue", "check"), ("catalogue", "--file"),
                                     ("run", "--workload", "true", "--plan", "plan.json", "--catalogue")])
def test_a_catalogue_past_what_the_parser_bears_is_refused(inputs: Path, text: str, reason: str,
                                                           command: tuple[str, ...]) -> None:
    (inputs / "catalogue.toml").write_text(text)
    err = refused(*command, inputs / "catalogue.toml")
    assert "catalogue.toml" in err and reason in err, err


@pytest.mark.parametrize(("name", "reason"), [
    ("", "a tool name must be a non-empty string"),
    ("t" * 200, "the tool name is 200 characters long; a tool name has at most 128"),
    ("read\nfile", "holds a control or other unprintable character"),
    ("read_\ud800", "is not Unicode text (it holds a lone surrogate)"),
])
def test_a_tool_name_no_report_can_print_is_refused_in_a_catalogue_and_from_mcp(inputs: Path, name: str,
                                                                               reason: str) -> None:
    (inputs / "catalogue.json").write_text(json.dumps({**CATALOGUE, "tools": {name: "READ_ONLY"}}))
    assert reason in refused("catalogue", "check", inputs / "catalogue.json")
    (inputs / "tools.json").write_text(json.dumps({"tools": [{"name": name, "inputSchema": {"type": "object"}}]}))
    assert (reason if name else 'no "name"') in refused("catalogue", "from-mcp", inputs / "tools.json")


def test_what_an_honest_document_holds_is_read_as_before() -> None:
    text = (f"{'.'.join(['a'] * 63)} = {2**63 - 1}\nb = {-(2**63)}\n"
            f"c = {'[' * 63}1{']' * 63}\n")
    document = _toml.loads(text)
    assert document["b"] == -(2**63)
    with pytest.raises(ValueError, match="an integer of 64 bits"):
        _toml.loads(f"b = {hex(2**63)}\n")


@pytest.mark.parametrize("value", [int(HEX, 16), -int(HEX, 16), 2**200], ids=["20000 bits", "-20000 bits", "2**200"])
def test_a_bound_refuses_an_integer_of_any_size_without_converting_it(value: int) -> None:
    assert not limits.LIMITS["timeout"].allows(value) and not limits.LIMITS["seed"].allows(value)


@pytest.mark.parametrize("seconds", ["1e-300", "0.001"])
def test_a_timeout_too_short_to_start_a_process_is_refused(inputs: Path, seconds: str) -> None:
    (inputs / "scenario.toml").write_text(GOOD)
    assert "give a number of seconds from 0.01 to 86400" in refused("run", inputs / "scenario.toml", "--timeout",
                                                                     seconds)
