"""Every field of a scenario file is checked against one table before anything runs.

Each case was a traceback, a wrong verdict or silently accepted before the
table: it now exits 2 naming the file, the field and the fix. Values that
become paths (world files, service areas, the name of the evidence folder)
cannot reach outside the world or the runs folder.
"""

from __future__ import annotations

import pytest

from killpoint.catalogue import load_catalogue
from killpoint.harness.config.scenario import load_scenario, unknown_tool_problems, unlisted_tools, unlisted_tools_note
from killpoint.harness.model import Plan, PlannedCall
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
    ("timeout = nan\n", "", ("timeout: nan is not a number of seconds from 0.01 to 86400",)),
    ("catalogue = 5\n", "", ("catalogue: 5 is not a string",)),
    ('world_on_device = "yes"\n', "", ("world_on_device: 'yes' is not true or false", "world_on_device = true")),
    ('name = "/../../x"\n', "", ("name: '/../../x' is not a plain name (it names the evidence folder)",)),
    ('backend = "forkservr"\n', "", ("did you mean 'forkserver'?",)),
    ("", '[schedule]\nmode = "exhausitve"\n', ("schedule.mode: 'exhausitve' is not one of exhaustive, random "
                                              "(did you mean 'exhaustive'?)",)),
    ("", '[schedule]\ndepth = "deep"\n', ("schedule.depth: 'deep' is not a whole number",)),
    ("", '[schedule]\nruns = "many"\n', ("schedule.runs: 'many' is not a whole number",)),
    ("", '[schedule]\nkill_at = "c1:after_effect"\n', ("schedule.kill_at: 'c1:after_effect' is not a list of kill "
                                                       "points", 'kill_at = ["c1:after_effect"]')),
    ("", '[schedule]\nmdoe = "random"\n', ("unknown key 'mdoe' of schedule; did you mean 'mode'?",)),
    ("", "[world]\nstate = 5\n", ("world.state: 5 is not a table",)),
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


def test_a_nul_byte_in_the_workload(killpoint, tmp_path):
    """No command line can carry a NUL: the launch raised ValueError ("embedded null byte") out of main."""
    path = write(tmp_path, "s.toml", 'workload = ["python3", "-c", "pass\\u0000"]\n' + PLAN)
    assert_usage_error(killpoint("run", path), "workload: a word of the command holds a NUL byte")


def test_a_binary_scenario_file(killpoint, tmp_path):
    path = tmp_path / "s.toml"
    path.write_bytes(b"\xff\xfe\x00binary")
    assert_usage_error(killpoint("run", path), "not a text file (not UTF-8)")


def test_a_datetime_in_args(killpoint, tmp_path):
    plan = '[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\ntool = "read_file"\nargs = { path = 1979-05-27 }\n'
    assert_usage_error(killpoint("run", scenario(tmp_path, plan=plan)), "calls[0].args: holds a value JSON cannot carry")


def test_a_misspelt_tool(killpoint, tmp_path):
    plan = '[plan]\ntask_id = "t"\n[[plan.calls]]\ncall_id = "c1"\ntool = "raed_file"\n'
    assert_usage_error(killpoint("run", scenario(tmp_path, plan=plan)),
                       "calls[0].tool: 'raed_file' is neither in the catalogue nor a fake tool; did you mean 'read_file'?")


def test_an_unlisted_tool_no_known_tool_is_close_to_is_accepted_as_the_catalogues_default():
    """The rules' default (an unlisted tool is UNKNOWN, so VERIFY) must stay testable: only a near miss is refused."""
    plan = Plan(task_id="t", calls=(PlannedCall("c1", "read_file", {}), PlannedCall("c2", "charge_card", {}),
                                    PlannedCall("c3", "charge_card", {}), PlannedCall("c4", "notify_ops", {})))
    catalogue = load_catalogue(ROOT / "fake_tools" / "catalogue.toml")
    assert unknown_tool_problems("plan.calls", plan, catalogue) == []
    assert unlisted_tools(plan, catalogue) == ["charge_card", "notify_ops"]
    assert unlisted_tools_note(plan, catalogue) == (
        "note: 'charge_card', 'notify_ops' are in neither the catalogue nor the fake tools: the rules class them "
        "UNKNOWN (the catalogue's default), and the workload carries them out itself")
    assert unlisted_tools_note(Plan(task_id="t", calls=plan.calls[:1]), catalogue) is None


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


@pytest.mark.parametrize(("tail", "fragment"), [
    ('[world.files]\n"." = "x"\n', "world.files.'.': a world file is a relative path inside the world"),
    ('[world.files]\n" " = "x"\n', "world.files.' ': a world file is a relative path inside the world"),
    ('[world.files]\n"a" = "x"\n"a/b" = "y"\n', "world.files.'a': another world file lies inside it"),
    ('[world.files]\n"' + "x" * 300 + '" = "y"\n', "too long for a file name (300 bytes in one name"),
])
def test_a_world_file_the_world_cannot_hold(killpoint, tmp_path, tail, fragment):
    """Each was an exception out of main (SandboxError, NotADirectoryError, OSError) when the world was seeded."""
    assert_usage_error(killpoint("run", scenario(tmp_path, tail=tail)), fragment)


def test_a_timeout_past_what_a_clock_can_wait(killpoint, tmp_path):
    """timeout = 1e300 passed the table and raised OverflowError out of main at the first wait."""
    result = killpoint("run", scenario(tmp_path, "timeout = 1e300\n"), "--kill-at", "c1:after_effect")
    assert_usage_error(result, "timeout: 1e+300 is not a number of seconds from 0.01 to 86400")


@pytest.mark.parametrize(("top", "fragment"), [
    ('image = ""\n', "image: '' is not a non-empty string"),
    ('backend = "subprocess"\nimage = "killpoint-host:1"\n', 'image: goes with backend = "docker", but the backend '
                                                            "here is 'subprocess'"),
])
def test_an_image_that_would_not_be_used(killpoint, tmp_path, top, fragment):
    assert_usage_error(killpoint("run", scenario(tmp_path, top), "--workload", "true"), fragment)


@pytest.mark.parametrize(("schedule", "fragment"), [
    ('mode = "random"\n', 'schedule.runs: missing; mode = "random" needs it: write runs = 200'),
    ('mode = "random"\nruns = 3\ndepth = 2\n', 'schedule.depth: goes with mode = "exhaustive", but here the mode is '
                                                '"random"'),
    ('mode = "exhaustive"\nruns = 3\n', 'schedule.runs: goes with mode = "random", but here the mode is "exhaustive"'),
    ("seed = 4\n", 'schedule.seed: goes with mode = "random", but here the mode is "exhaustive"'),
    ('mode = "random"\nruns = 3\nkill_at = ["c1:after_effect"]\n',
     'schedule.runs: goes with mode = "random", but here kill_at gives the kills'),
    ("kill_at = []\n", "schedule.kill_at: [] is not a list of kill points (one kill per incarnation, at least one)"),
])
def test_a_schedule_key_that_would_not_act(killpoint, tmp_path, schedule, fragment):
    """Each ran a session that silently ignored the key (mode = "random" without runs ran exhaustively)."""
    result = killpoint("run", scenario(tmp_path, tail="[schedule]\n" + schedule), "--workload", "true")
    assert_usage_error(result, fragment)


@pytest.mark.parametrize(("kill", "fragment"), [
    ("c9:after_effect", "schedule.kill_at[1]: 'c9:after_effect': the plan has no call 'c9'; its calls are c1"),
    ("c1:after_lunch", "schedule.kill_at[1]: 'c1:after_lunch': unknown point 'after_lunch'"),
    ("@nan", "schedule.kill_at[1]: '@nan': a timed kill is @SECONDS"),
    ("c1:after_finished/torn:0", "schedule.kill_at[1]: 'c1:after_finished/torn:0': torn:N keeps N per mille"),
])
def test_a_scenario_kill_point_is_named_by_its_file_and_field(killpoint, tmp_path, kill, fragment):
    """The scenario's own kills were blamed on a --kill-at flag nobody gave."""
    path = scenario(tmp_path, tail=f'[schedule]\nkill_at = ["c1:after_effect", "{kill}"]\n')
    result = killpoint("run", path)
    assert_usage_error(result, f"{path}: {fragment}")
    assert "--kill-at" not in result.err


def test_every_problem_of_the_file_its_plan_file_catalogue_and_kills_comes_at_once(killpoint, tmp_path):
    """A bad field, a bad plan file, a bad catalogue and a bad kill point: one answer lists all four.

    The kill point was checked only once the rest was fixed; a bad --plan file hid the others.
    """
    plan = write(tmp_path, "plan.json", '{"task_id": "t", "calls": [{"call_id": "c1", "tool": 5}]}')
    catalogue = write(tmp_path, "c.toml", '[tools]\nread_file = { class = "READ_MOSTLY" }\n')
    path = write(tmp_path, "s.toml", WORKLOAD + 'timeout = -1\nplan = "plan.json"\ncatalogue = "c.toml"\n'
                 '[schedule]\nkill_at = ["c9:after_effect"]\n')
    assert_usage_error(killpoint("run", path), "the scenario has 3 problem(s)", f"{path}: timeout: -1",
                       f"{plan}: calls[0].tool: 5 is not a non-empty string", f"{catalogue}:2: tool 'read_file'")
    inline = scenario(tmp_path, "timeout = -1\n", tail='[schedule]\nkill_at = ["c9:after_effect"]\n')
    assert_usage_error(killpoint("run", inline), "the scenario has 2 problem(s)", "timeout: -1",
                       "schedule.kill_at[0]: 'c9:after_effect': the plan has no call 'c9'")


def test_the_flags_report_their_workload_plan_and_catalogue_problems_together(killpoint, tmp_path):
    plan = write(tmp_path, "plan.json", '{"calls": [{"call_id": "c1", "tool": "read_file"}]}')
    catalogue = write(tmp_path, "c.toml", "[tools]\nread_file = 5\n")
    result = killpoint("run", "--workload", "python -m 'x", "--plan", plan, "--catalogue", catalogue)
    assert_usage_error(result, "3 problem(s); nothing was run", "No closing quotation", f"{plan}: task_id: missing",
                       f"{catalogue}:2: tool 'read_file'")


def test_a_misspelt_tool_in_a_plan_file(killpoint, tmp_path):
    """The scenario file's plan was checked for misspelt tools, a --plan file's was not: the run went ahead."""
    plan = write(tmp_path, "plan.json", '{"task_id": "t", "calls": [{"call_id": "c1", "tool": "raed_file"}]}')
    assert_usage_error(killpoint("run", "--workload", "true", "--plan", plan),
                       f"{plan}: calls[0].tool: 'raed_file' is neither in the catalogue nor a fake tool")
