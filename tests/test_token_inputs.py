"""A repro token is pasted by a person: anything but a token killpoint made is refused with the field and the fix,
and what a valid token may run is decided by ``repro/safety``, never by the token."""

from __future__ import annotations

import base64
import json
import shutil
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from killpoint.errors import ConfigError
from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.execute.session import token_for
from killpoint.harness.model import AtPoint, Job, Verdict
from killpoint.harness.repro import safety as repro_safety
from killpoint.harness.repro.safety import (RUN_EMBEDDED_FLAG, decide, needs_run_flag, project_root, recorded_origin,
                                            repro_line, scenario_for_token, shipped_workload)
from killpoint.harness.repro.token import LONGEST_PAYLOAD, ReproToken
from tests.helpers import DEMO, ROOT, mutant_workload

pytestmark = pytest.mark.hostile  # the bad-input fuzz of the hostile-input suite (docs/security.md)

GOOD = {"origin": {"scenario": "scenarios/demo.toml"}, "plan_digest": "3f9a0c2b1d4e",
        "catalogue_digest": "0a1b2c3d4e5f", "schedule": ["c5:after_effect"]}
FOREIGN = "sh -c 'id > /tmp/killpoint-owned'"


def encoded(payload: Any) -> str:
    """A token as anyone can make one: JSON (or raw bytes), compressed, base64."""
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return "kp1." + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as error:
        ReproToken.decode(text)
    return str(error.value)


@pytest.mark.parametrize(("changes", "named"), [
    ({"origin": {}}, "token.origin: names neither a scenario file ('scenario') nor a workload and its plan"),
    ({"origin": "scenarios/demo.toml"}, "token.origin: must be an object naming the scenario file"),
    ({"origin": {"scenario": {"nested": 1}}}, "token.origin.scenario: must be non-empty text"),
    ({"origin": {"workload": "x"}}, "token.origin: names neither a scenario file"),
    ({"origin": {"scenario": "s.toml", "plan": "p.json"}}, "token.origin: unknown field(s) 'plan'"),
    ({"schedule": [5]}, "token.schedule[0]: must be non-empty text like 'c3:after_effect', got int 5"),
    ({"schedule": "c5:after_effect"}, "token.schedule: must be a list, got text"),
    ({"seed": "7"}, "token.seed: must be a whole number, got text '7'"),
    ({"seed": True}, "token.seed: must be a whole number, got boolean True"),
    ({"seed": 1.5}, "token.seed: must be a whole number, got float 1.5"),
    ({"backend_options": {"privileged": "true"}}, "token.backend_options: unknown field(s) 'privileged'; it has image, restart"),
    ({"backend_options": {"restart": "always"}}, "token.backend_options.restart: must be one of new, same"),
    ({"backend": "ssh"}, "token.backend: must be one of subprocess, forkserver, docker"),
    ({"plan_digest": "../../etc"}, "token.plan_digest: '../../etc' is not of the form '3f9a0c2b1d4e'"),
    ({"expect": [["write-ahead"]]}, "token.expect[0]: must be non-empty text"),
    ({"drift": "append"}, "token.drift: 'append' is not of the form 'append=READ_ONLY'"),
    ({"run": -1}, "token.run: -1 is outside 0..1000000000"),
    ({"colour": "red"}, "token: unknown field(s) 'colour'"),
])
def test_an_ill_typed_field_is_refused_naming_it(changes: dict[str, Any], named: str) -> None:
    message = refusal(encoded({**GOOD, **changes}))
    assert named in message, message
    assert "copy the whole token again from the failure's 'reproduce:' line" in message


def test_every_problem_is_named_at_once() -> None:
    message = refusal(encoded({"origin": {}, "seed": "7"}))
    for field in ("token.plan_digest: missing", "token.catalogue_digest: missing", "token.schedule: missing",
                  "token.origin: names neither", "token.seed: must be a whole number"):
        assert field in message, message


def test_a_payload_that_is_not_an_object_is_refused() -> None:
    assert "token: must be an object (a repro token's payload), got list" in refusal(encoded([1, 2]))


def test_a_deeply_nested_payload_is_refused_without_recursing() -> None:
    message = refusal(encoded(b'{"origin": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"))
    assert "repro token is damaged (its payload is not JSON: nested too deeply)" in message


def test_a_zlib_bomb_stops_at_the_payload_bound() -> None:
    bomb = encoded({**GOOD, "padding": "a" * 20_000_000})  # 20 MB that compress to about 20 KB
    assert len(bomb) < 40_000
    assert f"it decompresses to more than {LONGEST_PAYLOAD} bytes" in refusal(bomb)


def test_an_overlong_token_is_refused_before_decoding() -> None:
    assert "more than a token ever has" in refusal("kp1." + "A" * 100_000)


@pytest.mark.parametrize(("text", "why"), [
    ("kp1." + base64.urlsafe_b64encode(bytes(range(256))).decode(), "it does not decompress"),
    (encoded(bytes(range(256))), "its payload is not JSON: not UTF-8 text"),
    (encoded(b'{"origin": NaN}'), "its payload is not JSON: NaN is not a JSON number"),
    (encoded({**GOOD})[:-8], "it is cut short"),
    ("kp1.ab\u00e9cd", "it is not base64 text"),
])
def test_bytes_that_are_not_a_token_say_how_they_are_damaged(text: str, why: str) -> None:
    assert f"repro token is damaged ({why})" in refusal(text)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                    | st.text(max_size=8), lambda children: st.lists(children, max_size=3)
                    | st.dictionaries(st.text(max_size=8), children, max_size=3), max_leaves=12)
FIELD_NAMES = st.sampled_from([*GOOD, "seed", "expect", "drift", "backend", "backend_options", "run", "origin"])


@given(st.dictionaries(FIELD_NAMES, JSON, max_size=4))
def test_any_payload_decodes_to_a_well_typed_token_or_is_refused(changes: dict[str, Any]) -> None:
    try:
        token = ReproToken.decode(encoded({**GOOD, **changes}))
    except ConfigError:
        return
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in token.origin.items())
    assert all(isinstance(kill, str) for kill in token.schedule) and all(isinstance(p, str) for p in token.expect)
    assert token.seed is None or (type(token.seed) is int)
    assert token.run is None or (type(token.run) is int and token.run >= 0)
    assert set(token.backend_options) <= {"image", "restart"}


@given(st.binary(max_size=200))
def test_any_bytes_after_the_prefix_are_refused_as_config_errors(data: bytes) -> None:
    for text in (encoded(data), "kp1." + base64.urlsafe_b64encode(data).decode()):
        try:
            ReproToken.decode(text)
        except ConfigError:
            pass


def test_tokens_made_before_backend_and_run_existed_still_decode() -> None:
    token = ReproToken.decode(encoded({**GOOD, "seed": 99, "expect": ["write-ahead"], "drift": None}))
    assert (token.backend, token.backend_options, token.run, token.seed) == ("subprocess", {}, None, 99)


def test_a_made_token_round_trips_with_its_run() -> None:
    token = ReproToken.decode(encoded({**GOOD, "run": 17, "backend": "docker",
                                       "backend_options": {"image": "killpoint-host:1", "restart": "same"}}))
    assert ReproToken.decode(token.encode()) == token and token.run == 17


# What a token may run.

def demo_token(**origin: str) -> ReproToken:
    scenario_origin = {"scenario": str(DEMO), **origin}
    return ReproToken.decode(encoded({**GOOD, "origin": scenario_origin}))


FILE_WORKLOAD = load_scenario(DEMO).workload


def test_a_scenario_files_token_runs_the_files_own_workload() -> None:
    assert decide(demo_token(), FILE_WORKLOAD, run_embedded_command=False).command is None


def test_a_command_beside_a_scenario_file_is_refused_and_shown_without_the_flag() -> None:
    with pytest.raises(ConfigError) as error:
        decide(demo_token(workload=FOREIGN), FILE_WORKLOAD, run_embedded_command=False)
    message = str(error.value)
    assert FOREIGN in message and "--workload over the scenario file" in message
    assert f"repro {RUN_EMBEDDED_FLAG} kp1." in message


def test_the_flag_runs_the_carried_command_and_shows_it() -> None:
    decision = decide(demo_token(workload=FOREIGN), FILE_WORKLOAD, run_embedded_command=True)
    assert decision.command == FOREIGN and FOREIGN in (decision.notice or "")


@pytest.mark.parametrize("command", [mutant_workload("retry_non_idempotent"), "{python} -m killpoint.scenarios.reference_runtime",
                                     "{python}  -m killpoint.scenarios.silent killpoint.scenarios.mutants.retry_non_idempotent",
                                     "{python} -m killpoint.scenarios.standalone.runtime"])
def test_a_shipped_workload_beside_a_scenario_file_runs_without_the_flag(command: str) -> None:
    decision = decide(demo_token(workload=command), FILE_WORKLOAD, run_embedded_command=False)
    assert decision.command == command and decision.notice is None


@pytest.mark.parametrize("command", ["{python} -m killpoint.scenarios.mutants.no_such_mutant",
                                     "{python} -m killpoint.scenarios.mutants.retry_non_idempotent; id",
                                     "{python} -m killpoint.scenarios.mutants.retry_non_idempotent --evil",
                                     "{python} -m killpoint.scenarios.hostile", "python -m killpoint.scenarios.reference_runtime",
                                     "{python} -m killpoint.scenarios.silent sh", "{python} 'unterminated"])
def test_anything_else_is_not_a_shipped_workload(command: str) -> None:
    assert not shipped_workload(command)
    assert needs_run_flag({"scenario": "s.toml", "workload": command})


def test_the_files_own_command_given_as_workload_runs_without_the_flag() -> None:
    assert decide(demo_token(workload="{python} -m killpoint.scenarios.reference_runtime"), FILE_WORKLOAD,
                  run_embedded_command=False).command is not None
    own = decide(demo_token(workload="/bin/true x"), ("/bin/true", "x"), run_embedded_command=False)
    assert own.command is None


def flags_token(**extra: str) -> ReproToken:
    return ReproToken.decode(encoded({**GOOD, "origin": {"workload": FOREIGN, "plan": "plan.json", **extra}}))


def test_a_token_from_workload_and_plan_runs_its_command_only_when_asked() -> None:
    with pytest.raises(ConfigError, match="--workload and --plan plan.json"):
        decide(flags_token(), None, run_embedded_command=False)
    shipped = ReproToken.decode(encoded({**GOOD, "origin": {"workload": mutant_workload("retry_unknown"),
                                                            "plan": "plan.json"}}))
    with pytest.raises(ConfigError, match=RUN_EMBEDDED_FLAG):
        decide(shipped, None, run_embedded_command=False)
    assert decide(flags_token(), None, run_embedded_command=True).command == FOREIGN


def test_the_printed_reproduce_line_carries_the_flag_exactly_when_needed() -> None:
    assert RUN_EMBEDDED_FLAG not in repro_line(demo_token().encode())
    assert RUN_EMBEDDED_FLAG not in repro_line(demo_token(workload=mutant_workload("retry_unknown")).encode())
    assert repro_line(demo_token(workload=FOREIGN).encode()).endswith(f" repro {RUN_EMBEDDED_FLAG} "
                                                                      f"{demo_token(workload=FOREIGN).encode()}")
    assert f" repro {RUN_EMBEDDED_FLAG} kp1." in repro_line(flags_token().encode())
    assert repro_line("kp1.not-a-token").endswith(" repro kp1.not-a-token")


def test_a_re_encoded_token_cannot_slip_a_command_past_the_scenario_file(tmp_path: Path) -> None:
    token = ReproToken.decode(token_for(load_scenario(DEMO), Job(0, (AtPoint("after_effect", "c5"),)), Verdict(True)))
    forged = replace(token, origin={**token.origin, "workload": FOREIGN})
    with pytest.raises(ConfigError, match="carries its own workload command"):
        scenario_for_token(forged, run_embedded_command=False, cwd=tmp_path)
    scenario, notice = scenario_for_token(forged, run_embedded_command=True, cwd=tmp_path)
    assert scenario.workload == ("sh", "-c", "id > /tmp/killpoint-owned") and FOREIGN in (notice or "")


# Where a token's files are.

def test_a_token_records_the_scenario_relative_to_the_project_root_and_absolute(tmp_path: Path) -> None:
    origin = recorded_origin({"scenario": "demo.toml"}, ROOT / "scenarios")
    assert origin == {"scenario": "scenarios/demo.toml", "scenario_absolute": str(DEMO)}
    assert project_root(ROOT / "scenarios" / "mutants") == ROOT and project_root(tmp_path) is None
    outside = recorded_origin({"scenario": "s.toml", "workload": "w"}, tmp_path)
    assert outside == {"scenario": "s.toml", "scenario_absolute": str(tmp_path / "s.toml"), "workload": "w"}


def test_a_token_resolves_from_any_folder_of_the_checkout_and_from_outside_it(tmp_path: Path) -> None:
    token = ReproToken.decode(token_for(load_scenario(DEMO), Job(0, ()), Verdict(True)))
    for cwd in (ROOT, ROOT / "tests" / "integration", tmp_path):
        scenario, notice = scenario_for_token(token, run_embedded_command=False, cwd=cwd)
        assert scenario.plan.digest == load_scenario(DEMO).plan.digest and notice is None


def test_an_old_token_with_a_relative_path_resolves_below_the_project_root() -> None:
    old = ReproToken.decode(encoded(GOOD))  # "scenarios/demo.toml", no absolute path: made before it was stored
    scenario, _ = scenario_for_token(old, run_embedded_command=False, cwd=ROOT / "harness" / "certify")
    assert Path(scenario.origin["scenario"]).resolve() == DEMO


def test_a_checkout_of_the_project_elsewhere_is_preferred_to_the_absolute_path(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "scenarios").mkdir()
    shutil.copy(DEMO, tmp_path / "scenarios" / "demo.toml")
    token = ReproToken.decode(token_for(load_scenario(DEMO), Job(0, ()), Verdict(True)))
    scenario, _ = scenario_for_token(token, run_embedded_command=False, cwd=tmp_path / "scenarios")
    assert Path(scenario.origin["scenario"]) == tmp_path / "scenarios" / "demo.toml"


def test_a_scenario_found_nowhere_says_every_place_tried(tmp_path: Path) -> None:
    gone = ReproToken.decode(encoded({**GOOD, "origin": {"scenario": "chaos/gone.toml",
                                                         "scenario_absolute": "/nowhere/chaos/gone.toml"}}))
    with pytest.raises(ConfigError) as error:
        scenario_for_token(gone, run_embedded_command=False, cwd=tmp_path)
    message = str(error.value)
    assert f"tried {tmp_path / 'chaos/gone.toml'}, /nowhere/chaos/gone.toml" in message
    assert "Run repro from a checkout of the project the token was made in" in message


def test_a_workload_and_plan_token_runs_in_the_folder_it_was_made_in(tmp_path: Path) -> None:
    made_in = tmp_path / "project"
    made_in.mkdir()
    (made_in / "plan.json").write_text(json.dumps(load_scenario(DEMO).plan.to_json()))
    origin = recorded_origin({"workload": "node agent.js", "plan": "plan.json"}, made_in)
    assert origin["directory_absolute"] == str(made_in)
    token = ReproToken.decode(encoded({**GOOD, "origin": origin}))
    scenario, notice = scenario_for_token(token, run_embedded_command=True, cwd=tmp_path)
    assert scenario.cwd == made_in and scenario.workload == ("node", "agent.js") and "node agent.js" in (notice or "")
    old = ReproToken.decode(encoded({**GOOD, "origin": {"workload": "node agent.js", "plan": "plan.json"}}))
    assert scenario_for_token(old, run_embedded_command=True, cwd=made_in)[0].cwd == made_in
    with pytest.raises(ConfigError, match=f"the token's plan plan.json .* is not here; tried {tmp_path}"):
        scenario_for_token(old, run_embedded_command=True, cwd=tmp_path)


def test_the_shipped_modules_are_the_mutants_on_disk() -> None:
    mutants = {path.stem for path in (ROOT / "scenarios" / "mutants").glob("*.py")} - {"__init__"}
    assert {f"killpoint.scenarios.mutants.{name}" for name in mutants} <= repro_safety.SHIPPED_MODULES
    assert not any("hostile" in module for module in repro_safety.SHIPPED_MODULES)
