"""Every number and name a subcommand's flags take, fed values no one can mean: each is a usage error (exit 2)
naming the flag, with no traceback, and nothing runs.

The bounds are ``limits.LIMITS``, the table scenario files are checked with too. A
value that got past the checks would start a session, a hunt or a certification;
``nothing_runs`` makes each of those raise, so such a case ends as exit 4 with a
traceback here, never as a run.
"""

from __future__ import annotations

import pytest

from tests.helpers import DEMO

pytestmark = pytest.mark.hostile

HUGE = str(10**26)
DEMO_RUN = ("run", str(DEMO))
MCP = ("certify", "--mcp", "server {world}")

# (argv, the flag the message must name)
BAD_VALUES = [
    *[((*DEMO_RUN, "-j", value), "--jobs") for value in ("0", "-1", "100000", HUGE, "", "1.5")],
    *[((*DEMO_RUN, "--random", value), "--random") for value in ("0", "-1", "1000000000000", "", "nan")],
    *[((*DEMO_RUN, "--random", "3", "--seed", value), "--seed") for value in ("-1", HUGE, "", "1e3")],
    *[((*DEMO_RUN, "--timed", "--runs", value), "--runs") for value in ("0", "-5", "1000000000", "")],
    *[((*DEMO_RUN, "--exhaustive", "--depth", value), "--depth") for value in ("0", "-1", "99", HUGE, "")],
    *[((*DEMO_RUN, "--timeout", value), "--timeout") for value in ("0", "-1", "nan", "inf", "1e9", "")],
    *[((*DEMO_RUN, "--timed", "--timed-window", value), "--timed-window")
      for value in ("0", "-1", "nan", "inf", "-inf", "1e9", "")],
    *[((*DEMO_RUN, "--min-coverage", value), "--min-coverage") for value in ("-1", "101", "nan", "inf", "")],
    *[((*DEMO_RUN, "--shard", value), "--shard") for value in ("", "0/3", "4/3", "1/0", "a/b", "1/99999999")],
    *[((*DEMO_RUN, flag, value), flag) for flag in ("--workload", "--catalogue", "--drift", "--runs-dir",
                                                    "--scratch", "--json", "--html") for value in ("", "   ")],
    (("run", "--workload", "x", "--plan", ""), "--plan"),
    (("run", ""), "scenario"),
    *[((*DEMO_RUN, "--backend", "docker", "--image", value), "--image") for value in ("", "UPPER CASE!!", "a::b")],
    *[((*DEMO_RUN, flag, ""), flag) for flag in ("--kill-at", "--kill-on")],
    *[((*DEMO_RUN, "--kill-at", value), "--kill-at") for value in ("@1e300", "@-1", "@nan", "@inf")],
    *[(("hunt", str(DEMO), "--examples", value), "--examples") for value in ("0", "-1", "1000000000", "")],
    *[(("hunt", str(DEMO), "--max-calls", value), "--max-calls") for value in ("0", "-3", "1000", "")],
    *[(("hunt", str(DEMO), "--seed", value), "--seed") for value in ("-1", HUGE, "")],
    *[(("hunt", str(DEMO), flag, ""), flag) for flag in ("--workload", "--out")],
    (("hunt", ""), "scenarios"),
    (("repro", "kp1.x", "--runs-dir", ""), "--runs-dir"),
    *[(("merge", "shard-1.json", "--min-coverage", value), "--min-coverage") for value in ("-1", "101", "nan", "")],
    *[(("merge", "shard-1.json", flag, ""), flag) for flag in ("--json", "--html")],
    (("merge", ""), "REPORT.json"),
    *[(("prune", "--keep", value), "--keep") for value in ("-1", "1000000000", HUGE, "")],
    *[(("prune", "--older-than", value), "--older-than") for value in ("-1", "nan", "inf", "1e9", "")],
    (("prune", "--keep", "1", "--runs-dir", ""), "--runs-dir"),
    *[(("image", "build", "--tag", value), "--tag")
      for value in ("UPPER CASE!!", "", "name:", ":tag", "-name", "a" * 300, "name:" + "t" * 200)],
    *[(("certify", "append", "--claim", "NON_IDEMPOTENT", "--trials", value), "--trials")
      for value in ("0", "-1", "1000000000", "")],
    *[(("certify", "append", "--claim", "NON_IDEMPOTENT", "--seed", value), "--seed") for value in ("-1", HUGE)],
    *[((*MCP, "--call-timeout", value), "--call-timeout") for value in ("0", "-1", "nan", "inf", "1e9", "")],
    *[((*MCP, "--budget", value), "--budget") for value in ("0", "-1", "nan", "inf", "1e9", "")],
    *[(("certify", "append", flag, ""), flag) for flag in ("--claim", "--out", "--write-catalogue", "--python")],
    (("certify", "--catalogue", ""), "--catalogue"),
    (("certify", "--mcp", ""), "--mcp"),
    (("certify", "--check", ""), "--check"),
    *[(("catalogue", flag, ""), flag) for flag in ("--file", "--family")],
    (("catalogue", "check", ""), "FILE"),
    (("catalogue", "from-mcp", ""), "TOOLS.json"),
    (("show", ""), "RUN_DIR"),
]


@pytest.fixture
def nothing_runs(monkeypatch):
    """A session, hunt or certification that starts is a bug of these checks: it raises (exit 4, a traceback)."""
    import killpoint.harness.certify.run as certify_run
    import killpoint.harness.frontends.spec as spec
    import killpoint.harness.schedules.hunt as hunt

    def started(*args, **kwargs):
        raise AssertionError("the bad value was accepted and work started")

    for module, name in ((spec, "run_session"), (hunt, "hunt"), (certify_run, "certify"),
                         (certify_run, "claims_from_mcp"), (certify_run, "single_claim")):
        monkeypatch.setattr(module, name, started)


@pytest.mark.parametrize(("argv", "flag"), BAD_VALUES, ids=[" ".join(argv[:1] + argv[-2:]) for argv, _ in BAD_VALUES])
def test_a_value_no_one_can_mean_is_a_usage_error_naming_its_flag(killpoint, nothing_runs, monkeypatch, tmp_path,
                                                                  argv, flag):
    monkeypatch.chdir(tmp_path)  # prune's default folder, hunt's --out: nothing lands in the checkout
    result = killpoint(*argv)
    assert result.exit_code == 2, result.err
    assert "Traceback" not in result.err + result.out
    assert flag in result.err, result.err


@pytest.mark.parametrize(("argv", "bound"), [
    ((*DEMO_RUN, "-j", "100000"), "give a whole number from 1 to 128"),
    ((*DEMO_RUN, "--random", "1000000000000"), "give a whole number from 1 to 1000000"),
    ((*DEMO_RUN, "--random", "3", "--seed", "-1"), f"give a whole number from 0 to {2**63 - 1}"),
    ((*DEMO_RUN, "--timeout", "inf"), "give a number of seconds from 0.01 to 86400"),
    ((*DEMO_RUN, "--shard", "1/99999999"), "write K/N with 1 <= K <= N <= 10000"),
    ((*DEMO_RUN, "--workload", ""), "argument --workload: empty; give a value, or leave the flag out"),
    (("image", "build", "--tag", "UPPER CASE!!"), "is not a Docker image reference: write [REGISTRY/]NAME[:TAG]"),
])
def test_the_message_says_what_to_give(killpoint, nothing_runs, argv, bound):
    assert bound in killpoint(*argv).err


def test_a_scenario_file_and_the_flag_share_their_bounds(tmp_path):
    """[schedule] runs, seed and depth refuse exactly what --random, --seed and --depth refuse."""
    from killpoint.harness.config import limits
    from killpoint.harness.config.scenario_fields import SCHEDULE_FIELDS

    checks = {row.key: row.check for row in SCHEDULE_FIELDS}
    for key, limit in (("runs", "runs"), ("seed", "seed"), ("depth", "depth")):
        bound = limits.LIMITS[limit]
        for value in (bound.low - 1, bound.low, bound.high, bound.high + 1):
            assert (checks[key](value) is None) == bound.allows(value), (key, value)


@pytest.mark.parametrize("reference", ["killpoint-host:1", "localhost:5000/team/image:v1.2-rc_3",
                                       "registry.example.com/a__b/c.d-e", "image@sha256:" + "a" * 64, "[::1]:5000/x"])
def test_a_docker_reference_of_the_grammar_is_accepted(reference):
    from killpoint.harness.config import limits

    assert limits.image_reference(reference) == reference
