"""Every field of a scenario file is checked against one table before anything runs.

Each case was a traceback, a wrong verdict or silently accepted before the
table: it now exits 2 naming the file, the field and the fix. Values that
become paths (world files, service areas, the name of the evidence folder)
cannot reach outside the world or the runs folder.
"""

from __future__ import annotations

import pytest

from killpoint.harness.scenario import load_scenario
from tests.helpers import ROOT
from tests.test_config_errors import GOOD_CALL, assert_usage_error, write

WORKLOAD = 'workload = ["{python}", "-m", "killpoint.scenarios.reference_runtime"]\n'
PLAN = '[plan]\ntask_id = "t"\n' + GOOD_CALL


def scenario(tmp_path, top: str = "", tail: str = "", plan: str = PLAN):
    """A scenario file whose top-level keys are ``top`` and whose tables after the plan are ``tail``."""
    return write(tmp_path, "s.toml", WORKLOAD + top + plan + tail)


@pytest.mark.parametrize(("top", "tail", "fragments"), [
    ('max_incarnations = "lots"\n', "", ("max_incarnations: 'lots' is not a whole number", "write max_incarnations = 3")),
    ("max_incarnations = -5\n", "", ("max_incarnations: -5 is outside 1..100",)),
    ('schedule = "exhaustive"\n', "", ("schedule: 'exhaustive' is not a table", '[schedule] mode = "exhaustive"')),
    ("timeout = nan\n", "", ("timeout: nan is not a positive number of seconds",)),
    ("catalogue = 5\n", "", ("catalogue: 5 is not a string",)),
    ('name = "/../../x"\n', "", ("name: '/../../x' is not a plain name (it names the evidence folder)",)),
    ('backend = "forkservr"\n', "", ("did you mean 'forkserver'?",)),
    ("", '[schedule]\nmode = "exhausitve"\n', ("[schedule]: mode: 'exhausitve' is not one of exhaustive, random "
                                              "(did you mean 'exhaustive'?)",)),
    ("", '[schedule]\ndepth = "deep"\n', ("[schedule]: depth: 'deep' is not a whole number",)),
    ("", '[schedule]\nruns = "many"\n', ("[schedule]: runs: 'many' is not a whole number",)),
    ("", '[schedule]\nkill_at = "c1:after_effect"\n', ("[schedule]: kill_at: 'c1:after_effect' is not a list of kill "
                                                       "points", 'kill_at = ["c1:after_effect"]')),
    ("", '[schedule]\nmdoe = "random"\n', ("unknown key 'mdoe'; did you mean 'mode'?",)),
    ("", "[world]\nstate = 5\n", ("world: state: 5 is not a table",)),
    ("", '[world.files]\n"a.txt" = 5\n', ("world.files.'a.txt': 5 is not text",)),
    ("", '[world.files]\n"../outside.txt" = "x"\n', ("world.files.'../outside.txt': a world file is a relative path",)),
    ("", '[world.files]\n"/etc/x" = "x"\n', ("world.files.'/etc/x': a world file is a relative path",)),
    ("", '[world.state."/abs/path"]\nx = 1\n', ("world.state.'/abs/path': a service area is a plain name",)),
    ("", '[world.state."../up"]\nx = 1\n', ("world.state.'../up': a service area is a plain name",)),
    ("", "[world.state.alarms]\nwhen = 1979-05-27T07:32:00\n", ("world.state.alarms: holds a value JSON cannot carry",)),
])
def test_a_bad_field_is_named_with_its_fix(killpoint, tmp_path, top, tail, fragments):
    assert_usage_error(killpoint("run", scenario(tmp_path, top, tail)), *fragments)


def test_a_bad_max_incarnations_is_not_a_liveness_finding(killpoint, tmp_path):
    result = killpoint("run", scenario(tmp_path, "max_incarnations = -5\n"), "--kill-at", "c1:after_effect")
    assert_usage_error(result, "max_incarnations")
    assert "liveness" not in result.out


def test_an_unclosed_quote_in_the_workload(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", "workload = \"python -m 'runtime\"\n" + PLAN)
    assert_usage_error(killpoint("run", path), "workload: the command does not parse as a shell would split it")
    assert_usage_error(killpoint("run", scenario(tmp_path), "--workload", "python -m 'x"),
                       "--workload \"python -m 'x\": No closing quotation")


def test_a_binary_scenario_file(killpoint, tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b"\xff\xfe\x00binary")
    assert_usage_error(killpoint("run", path), "not a text file (not UTF-8)")


def test_a_datetime_in_args(killpoint, tmp_path):
    plan = '[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\ntool = "read_file"\nargs = { path = 1979-05-27 }\n'
    assert_usage_error(killpoint("run", scenario(tmp_path, plan=plan)), "calls[0].args: holds a value JSON cannot carry")


def test_a_tool_nobody_knows(killpoint, tmp_path):
    plan = '[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\ntool = "raed_file"\n'
    assert_usage_error(killpoint("run", scenario(tmp_path, plan=plan)),
                       "calls[0].tool: 'raed_file' is neither in the catalogue nor a fake tool")


def test_scenario_and_plan_problems_come_together(killpoint, tmp_path):
    plan = '[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\n'
    result = killpoint("run", scenario(tmp_path, "timeout = -1\n", plan=plan))
    assert_usage_error(result, "2 problem(s)", "timeout: -1", "calls[0].tool: missing")


@pytest.mark.parametrize(("text", "fragment"), [
    ('{"task_id": "t", "calls": [{"call_id": "c1", "tool": "read_file", "args": {"n": NaN}}]}', "NaN is not a JSON number"),
    ('{"task_id": "t", "task_id": "u", "calls": []}', "key(s) 'task_id' given twice in one object"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_a_plan_json_a_person_did_not_mean(killpoint, tmp_path, text, fragment):
    plan = write(tmp_path, "plan.json", text)
    assert_usage_error(killpoint("run", "--workload", "true", "--plan", plan), f"{plan}: not valid JSON: {fragment}")


def test_every_shipped_scenario_passes_the_table():
    for path in sorted((ROOT / "scenarios").glob("*.toml")):
        assert load_scenario(path).plan.calls, path


def test_a_scenario_nested_past_the_parser(killpoint, tmp_path):
    path = write(tmp_path, "s.toml", WORKLOAD + "x = " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert_usage_error(killpoint("run", path), "nested too deeply to read")
