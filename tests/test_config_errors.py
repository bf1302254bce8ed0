"""Bad input exits 2 with a message naming the file, line or field and the fix; never a traceback."""

from __future__ import annotations

import json

import pytest

from tests.helpers import DEMO

GOOD_CALL = '[[plan.calls]]\ncall_id = "c1"\ntool = "read_file"\nargs = { path = "a" }\n'
HEADER = 'workload = ["{python}", "-m", "killpoint.scenarios.reference_runtime"]\n[plan]\ntask_id = "t"\n'


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def assert_usage_error(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.out + result.err
    assert "Traceback" not in result.err + result.out
    for fragment in fragments:
        assert fragment in result.err, result.err


def test_malformed_toml(killpoint, tmp_path):
    path = write(tmp_path, "bad.toml", 'name = "x"\nworkload = = 3\n')
    assert_usage_error(killpoint("run", path), f"{path}: not valid TOML:", "line 2")


def test_missing_scenario_file(killpoint, tmp_path):
    assert_usage_error(killpoint("run", tmp_path / "nope.toml"), "nope.toml: cannot read the scenario (No such file or directory)")


def test_missing_workload_and_unknown_key_reported_together(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", 'colour = "blue"\n[plan]\ntask_id = "t"\n' + GOOD_CALL)
    result = killpoint("run", path)
    assert_usage_error(result, "2 problem(s)", "unknown key 'colour'", "workload: missing; write workload = [")


def test_duplicate_call_ids(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", HEADER + GOOD_CALL + GOOD_CALL)
    assert_usage_error(killpoint("run", path), "calls[1].call_id: 'c1' is used twice; call ids must be unique")


def test_call_missing_its_tool(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", HEADER + '[[plan.calls]]\ncall_id = "c1"\n')
    assert_usage_error(killpoint("run", path), "plan.calls[0].tool: missing; write tool = ")


def test_malformed_plan_json(killpoint, tmp_path):
    plan = write(tmp_path, "plan.json", '{"task_id": "t", "calls": [}')
    assert_usage_error(killpoint("run", "--workload", "true", "--plan", plan), f"{plan}: not valid JSON")


def test_plan_json_missing_fields(killpoint, tmp_path):
    plan = write(tmp_path, "plan.json", json.dumps({"calls": []}))
    assert_usage_error(killpoint("run", "--workload", "true", "--plan", plan),
                       f"{plan}: task_id: missing; write task_id = ", "calls: empty: a plan makes at least one call")


def test_unknown_tool_class_in_catalogue(killpoint, tmp_path):
    catalogue = write(tmp_path, "c.toml", '[tools]\nread_file = { class = "READ_MOSTLY" }\n')
    path = write(tmp_path, "s.toml", f'catalogue = "{catalogue}"\n' + HEADER + GOOD_CALL)
    assert_usage_error(killpoint("run", path), f"{catalogue}:2: tool 'read_file': unknown class 'READ_MOSTLY'; use one of READ_ONLY")


def test_duplicate_tool_in_catalogue_names_both_lines(killpoint, tmp_path):
    catalogue = write(tmp_path, "c.toml", '[tools]\nappend = { class = "NON_IDEMPOTENT" }\nappend = { class = "READ_ONLY" }\n')
    result = killpoint("run", "--workload", "true", "--plan", write(tmp_path, "p.json", '{"task_id":"t","calls":[{"call_id":"c1","tool":"append"}]}'),
                       "--catalogue", catalogue)
    assert_usage_error(result, f"{catalogue}:3: tool 'append' listed twice (first at line 2)")


@pytest.mark.parametrize(("flags", "message"), [
    (["--exhaustive", "--random", "3"], "--exhaustive and --random are exclusive"),
    (["--random", "0"], "--random 0: give a whole number from 1 to 1000000"),
    (["--kill-at", "c9:after_effect"], "the plan has no call 'c9'"),
    (["--timeout", "-1"], "--timeout -1.0: give a number of seconds from 0.01 to 86400"),
    (["--timeout", "1e300"], "--timeout 1e+300: give a number of seconds from 0.01 to 86400"),
    (["--plan", "x.json"], "--plan and --catalogue go with --workload alone"),
])
def test_bad_flags(killpoint, flags, message):
    assert_usage_error(killpoint("run", DEMO, *flags), message)


def test_nothing_to_run(killpoint):
    assert_usage_error(killpoint("run"), "nothing to run: give a scenario file")


def test_unknown_flag_is_argparse_exit_2(killpoint):
    result = killpoint("run", DEMO, "--kill-everything")
    assert result.exit_code == 2 and "unrecognized arguments: --kill-everything" in result.err
