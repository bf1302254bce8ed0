"""The CI files run as written: their pytest command, in a user's project with a five-line chaos
test, runs its shard under xdist, writes the JUnit XML and keeps the failing session's evidence
and HTML report where the artifact steps pick them up; their `killpoint run --shard` jobs and the
`killpoint merge` job after them, run on runner folders of their own with the artifacts carried
between them as each CI system carries them, give one merged verdict."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from killpoint.harness.config.scenario import load_scenario
from killpoint.harness.model import Job
from killpoint.harness.schedules.explore import shard_of
from killpoint.harness.schedules.schedule import parse_kill_point
from tests.helpers import DEMO, ROOT

pytest_plugins = ["pytester"]

KILL = "c4:after_started"
CHAOS_TEST = f"""
def test_my_runtime_recovers(killpoint_run):
    killpoint_run("chaos/demo.toml", workload="{{python}} -m killpoint.scenarios.mutants.retry_non_idempotent", kill_at="{KILL}")
"""


def pytest_command(text: str) -> str:
    """The folded `python -m pytest ...` block of a CI file, as one command line."""
    lines = text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.strip().startswith("python -m pytest"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start]]
    for line in lines[start + 1:]:
        if not line.strip() or len(line) - len(line.lstrip()) != indent:
            break
        block.append(line)
    return " ".join(line.strip() for line in block)


@pytest.mark.parametrize(("ci_file", "junit"), [("github-actions.yml", "junit-{shard}.xml"),
                                                 ("gitlab-ci.yml", "junit.xml")])
def test_the_ci_files_pytest_command_runs_as_written(pytester, monkeypatch, ci_file, junit):
    # The shard that holds the one schedule, as a matrix job or GitLab node would get it.
    shard = shard_of(Job(0, (parse_kill_point(KILL, load_scenario(DEMO).plan),)), 3)
    monkeypatch.setenv("CI", "true")
    for name, value in {"SHARDS": "3", "CI_NODE_INDEX": str(shard), "CI_NODE_TOTAL": "3"}.items():
        monkeypatch.setenv(name, value)
    (pytester.path / "chaos").mkdir()
    shutil.copy(DEMO, pytester.path / "chaos" / "demo.toml")
    (pytester.path / "tests" / "chaos").mkdir(parents=True)
    (pytester.path / "tests" / "chaos" / "test_recovery.py").write_text(CHAOS_TEST)

    command = pytest_command((ROOT / "ci" / ci_file).read_text()).replace("${{ matrix.shard }}", str(shard))
    words = [os.path.expandvars(word) for word in shlex.split(command)]
    assert words[:3] == ["python", "-m", "pytest"]
    result = pytester.runpytest_subprocess(*words[3:])

    result.assert_outcomes(failed=1)
    output = result.stdout.str()
    assert f"killpoint: seed 0, shard {shard}/3" in output
    assert output.count("killpoint repro kp1.") >= 2
    assert (pytester.path / junit.format(shard=shard)).is_file()
    (report,) = (pytester.path / "killpoint-report").glob(f"{shard}/*/killpoint-1/report.html")
    assert "killpoint repro kp1." in report.read_text()

    # The last line reproduces the failure from the project's root, as a developer would run it.
    token = next(line for line in reversed(output.splitlines()) if "killpoint repro kp1." in line).split()[-1]
    repro = subprocess.run([sys.executable, "-m", "killpoint.harness.frontends.cli", "repro", token,
                            "--runs-dir", "repro-runs"],
                           cwd=pytester.path, capture_output=True, text=True, timeout=120)
    assert repro.returncode == 1 and "[interrupted-action]" in repro.stdout, repro.stdout + repro.stderr


# -- the sweep and verdict jobs: `killpoint run --shard` in each job, `killpoint merge` after them ----------------
#
# No schema check: jsonschema is installed but neither CI system's schema is (check-jsonschema, which
# vendors both, is not a dependency, and nothing may be fetched here), so the jobs are checked by what
# they do: each shard job's commands run as written, on a fresh runner folder of its own; its
# artifact is laid where the verdict job's download puts it; the verdict job's commands run there.

# Random schedules, seed 0 under CI: a few of them kill the mutant mid-append and fail. Shards go by a hash of a
# schedule's first kill, and with 8 no schedule fell in shard 2 of 3: such a shard establishes nothing (exit 3).
SWEEP_RUNS = 12


def sweep_scenario() -> str:
    """The demo run by a runtime that re-runs a non-idempotent tool, as a few random schedules."""
    text = DEMO.read_text().replace('"killpoint.scenarios.reference_runtime"',
                                    '"killpoint.scenarios.mutants.retry_non_idempotent"')
    return text.replace('[schedule]\nmode = "exhaustive"', f'[schedule]\nmode = "random"\nruns = {SWEEP_RUNS}')


def github_jobs(document: dict, shards_job: str = "sweep", verdict_job: str = "verdict") -> dict:
    """The shard and verdict jobs of the GitHub workflow: commands per shard, and where artifacts go."""
    sweep, verdict = document["jobs"][shards_job], document["jobs"][verdict_job]
    assert verdict["needs"] == shards_job and "!cancelled()" in verdict["if"], "the verdict must follow failing shards"
    shards = sweep["strategy"]["matrix"]["shard"]
    assert sweep["strategy"]["fail-fast"] is False and sweep["env"]["SHARDS"] == str(len(shards))
    (download,) = [step for step in verdict["steps"] if step.get("uses", "").startswith("actions/download-artifact")]
    # The upload the verdict downloads (a job may upload others, as the chaos job its JUnit XML).
    (upload,) = [step for step in sweep["steps"] if step.get("uses", "").startswith("actions/upload-artifact")
                 and all(fnmatch.fnmatch(step["with"]["name"].replace("${{ matrix.shard }}", str(shard)),
                                         download["with"]["pattern"]) for shard in shards)]
    assert upload["if"] == "always()", "a failing shard's report must be uploaded too"
    assert download["with"]["merge-multiple"] is True  # every artifact's files under one path, as uploaded

    def commands(job: dict, shard: int | None = None) -> list[str]:
        return [step["run"].replace("${{ matrix.shard }}", str(shard)).replace("${{ env.SHARDS }}", "$SHARDS")
                for step in job["steps"] if "run" in step and "pip install" not in step["run"]]

    # An artifact holds what is under its path; the download puts that under its own path.
    return {"shards": shards, "sweep": lambda shard: commands(sweep, shard), "verdict": commands(verdict),
            "env": lambda shard: sweep["env"], "verdict_env": verdict.get("env", {}),
            "artifacts": [(upload["with"]["path"], download["with"]["path"])]}


def gitlab_jobs(document: dict, shards_job: str = "killpoint-sweep", verdict_job: str = "killpoint-verdict") -> dict:
    """The shard and verdict jobs of the GitLab pipeline, as ``github_jobs`` gives them."""
    sweep, verdict = document[shards_job], document[verdict_job]
    stages = document["stages"]
    assert stages.index(sweep["stage"]) < stages.index(verdict["stage"])
    assert verdict["needs"] == [shards_job] and verdict["when"] == "always"
    assert sweep["artifacts"]["when"] == "always", "a failing shard's report must be kept too"
    total = sweep["parallel"]

    def commands(job: dict) -> list[str]:
        return [line for line in job["script"] if "pip install" not in line]

    # A job's artifact paths come back at the same paths in a job that needs it.
    return {"shards": list(range(1, total + 1)), "sweep": lambda shard: commands(sweep), "verdict": commands(verdict),
            "env": lambda shard: {**sweep.get("variables", {}), "CI_NODE_INDEX": str(shard), "CI_NODE_TOTAL": str(total)},
            "verdict_env": verdict.get("variables", {}),
            "artifacts": [(path, path) for path in sweep["artifacts"]["paths"]]}


def run_job(commands: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A job's commands as a runner runs them: one bash -e script in the job's folder, killpoint on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-e", "-c", "\n".join(commands)], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env, "CI": "true", "PATH": path}, timeout=600, check=False)


@pytest.mark.parametrize(("ci_file", "jobs_of"), [("github-actions-sweep.yml", github_jobs),
                                                   ("gitlab-ci-sweep.yml", gitlab_jobs)])
def test_the_ci_files_shard_jobs_and_merge_job_run_as_written(tmp_path, ci_file, jobs_of):
    jobs = jobs_of(yaml.safe_load((ROOT / "ci" / ci_file).read_text()))
    merge_folder = tmp_path / "verdict"
    merge_folder.mkdir()
    codes = []
    for shard in jobs["shards"]:
        runner = tmp_path / f"shard-{shard}"  # every matrix or parallel job starts on a runner of its own
        env = {key: str(value) for key, value in jobs["env"](shard).items()}
        scenario = runner / env["KILLPOINT_SCENARIO"]
        scenario.parent.mkdir(parents=True)
        scenario.write_text(sweep_scenario())
        result = run_job(jobs["sweep"](shard), runner, env)
        assert result.returncode in (0, 1), result.stdout + result.stderr
        codes.append(result.returncode)
        for uploaded, downloaded in jobs["artifacts"]:
            shutil.copytree(runner / uploaded, merge_folder / downloaded, dirs_exist_ok=True)

    merged = run_job(jobs["verdict"], merge_folder, {key: str(value) for key, value in jobs["verdict_env"].items()})
    assert codes.count(1) >= 1, "seed 0's schedules were meant to catch the mutant in some shard"
    assert merged.returncode == 1, merged.stdout + merged.stderr
    assert f"{SWEEP_RUNS} random schedules, seed 0; 3 of 3 shard(s)" in merged.stdout
    assert "[interrupted-action]" in merged.stdout and "first failure reproduces with:" in merged.stdout
    report = json.loads((merge_folder / "killpoint-merged" / "report.json").read_text())
    assert report["merged"]["given"] == [1, 2, 3] and len(report["runs"]) == SWEEP_RUNS
    assert "Failing runs" in (merge_folder / "killpoint-merged" / "report.html").read_text()
    assert "draws their timelines empty" not in merged.stderr, "the shards' evidence is not where their reports say"

    # The coverage gate is applied to the merged whole, which no shard sees (the chaos jobs' test runs it).
    assert any('--min-coverage "$KILLPOINT_MIN_COVERAGE"' in command for command in jobs["verdict"])
    assert jobs["verdict_env"]["KILLPOINT_MIN_COVERAGE"] == "0"


@pytest.mark.parametrize("ci_file", ["github-actions.yml", "github-actions-sweep.yml", "gitlab-ci.yml",
                                     "gitlab-ci-sweep.yml"])
def test_each_ci_file_is_one_workflow_whose_every_job_a_user_needs(ci_file):
    """A copied file runs whole: the pytest path's file names no scenario file, the sweep's no pytest test."""
    text = (ROOT / "ci" / ci_file).read_text()
    assert ("KILLPOINT_SCENARIO" in text) == ("sweep" in ci_file)
    assert ("python -m pytest" in text) != ("sweep" in ci_file)
    assert "--quiet" not in text, "a CI log shows a progress line every few seconds; --quiet would hide it"



# -- the chaos jobs and their verdict job: every pytest session's shards merged, the coverage gate on the whole ------

@pytest.mark.parametrize(("ci_file", "jobs_of"), [
    ("github-actions.yml", lambda document: github_jobs(document, "chaos", "chaos-verdict")),
    ("gitlab-ci.yml", lambda document: gitlab_jobs(document, "killpoint-chaos", "killpoint-chaos-verdict"))])
@pytest.mark.parametrize(("workload", "min_coverage", "verdict"), [
    ("killpoint.scenarios.mutants.retry_non_idempotent", "0", 1),  # the shard holding the kill fails: merged, 1
    ("killpoint.scenarios.reference_runtime", "50", 3)])  # one kill of thirty points: the gate on the whole says 3
def test_the_ci_files_chaos_shards_merge_into_one_verdict_per_session(tmp_path, ci_file, jobs_of, workload,
                                                                      min_coverage, verdict):
    """Each shard's pytest job as written, on a runner of its own, its reports always kept; the verdict job's
    commands on what the artifacts carry: one merge per session, exit 1 over 3 over 0, the gate applied there."""
    text = (ROOT / "ci" / ci_file).read_text()
    jobs = jobs_of(yaml.safe_load(text))
    merge_folder = tmp_path / "verdict"
    merge_folder.mkdir()
    for shard in jobs["shards"]:
        runner = tmp_path / f"shard-{shard}"
        (runner / "chaos").mkdir(parents=True)
        shutil.copy(DEMO, runner / "chaos" / "demo.toml")
        (runner / "tests" / "chaos").mkdir(parents=True)
        (runner / "tests" / "chaos" / "test_recovery.py").write_text(
            CHAOS_TEST.replace("killpoint.scenarios.mutants.retry_non_idempotent", workload))
        env = {key: str(value) for key, value in jobs["env"](shard).items()}
        command = pytest_command(text).replace("${{ matrix.shard }}", str(shard))
        result = run_job([command], runner, env)
        assert result.returncode in (0, 1), result.stdout + result.stderr
        for uploaded, downloaded in jobs["artifacts"]:
            shutil.copytree(runner / uploaded, merge_folder / downloaded, dirs_exist_ok=True)

    verdict_env = {key: str(value) for key, value in jobs["verdict_env"].items()}
    merged = run_job(jobs["verdict"], merge_folder, {**verdict_env, "KILLPOINT_MIN_COVERAGE": min_coverage})
    assert merged.returncode == verdict, merged.stdout + merged.stderr
    assert "kill at c4:after_started; 3 of 3 shard(s)" in merged.stdout, merged.stdout
    (page,) = (merge_folder / "killpoint-merged").glob("*/killpoint-1.html")
    assert page.name == "killpoint-1.html" and "killpoint" in page.read_text()


def kubernetes_jobs(documents: list[dict]) -> dict:
    """The Indexed Job's shard pods and the verdict Job of ci/kubernetes-sweep.yaml, each pod's script and
    environment as its container gets them, checked to share one volume at one path."""
    jobs = {document["metadata"]["name"]: document for document in documents if document["kind"] == "Job"}
    sweep, verdict = jobs["killpoint-sweep"]["spec"], jobs["killpoint-verdict"]["spec"]
    assert sweep["completionMode"] == "Indexed" and sweep["backoffLimit"] == 0, "a shard must run once, never retried"
    (shard_pod,), (verdict_pod,) = sweep["template"]["spec"]["containers"], verdict["template"]["spec"]["containers"]
    env = {variable["name"]: variable["value"] for variable in shard_pod["env"]}
    verdict_env = {variable["name"]: variable["value"] for variable in verdict_pod["env"]}
    assert sweep["completions"] == sweep["parallelism"] == int(env["SHARDS"])
    (claim,) = {volume["persistentVolumeClaim"]["claimName"] for job in (sweep, verdict)
                for volume in job["template"]["spec"]["volumes"]}
    (volume,) = {mount["mountPath"] for pod in (shard_pod, verdict_pod) for mount in pod["volumeMounts"]}
    assert env["KILLPOINT_VOLUME"] == verdict_env["KILLPOINT_VOLUME"] == volume and claim == "killpoint-sweep"
    assert shard_pod["command"] == verdict_pod["command"] == ["bash", "-e", "-c"]
    return {"indexes": range(sweep["completions"]), "sweep": shard_pod["args"], "env": env,
            "verdict": verdict_pod["args"], "verdict_env": verdict_env}


def test_the_kubernetes_indexed_job_and_its_verdict_job_merge_into_the_unsharded_verdict(tmp_path):
    """Each pod of the Indexed Job as its container runs it (JOB_COMPLETION_INDEX from 0, the shared volume at a
    folder of the test's), then the verdict Job over that volume: the merged verdict is the unsharded session's,
    run by run, and every pod succeeds whatever its shard found (a failed pod would be retried)."""
    jobs = kubernetes_jobs(list(yaml.safe_load_all((ROOT / "ci" / "kubernetes-sweep.yaml").read_text())))
    volume = tmp_path / "volume"
    volume.mkdir()
    for index in jobs["indexes"]:
        pod = tmp_path / f"pod-{index}"  # each pod is a machine of its own; only the volume is shared
        scenario = pod / jobs["env"]["KILLPOINT_SCENARIO"]
        scenario.parent.mkdir(parents=True)
        scenario.write_text(sweep_scenario())
        result = run_job(jobs["sweep"], pod, {**jobs["env"], "JOB_COMPLETION_INDEX": str(index),
                                              "KILLPOINT_VOLUME": str(volume)})
        assert result.returncode == 0, result.stdout + result.stderr
    merged = run_job(jobs["verdict"], tmp_path, {**jobs["verdict_env"], "KILLPOINT_VOLUME": str(volume)})
    assert merged.returncode == 1, merged.stdout + merged.stderr  # the mutant, caught in some shard
    assert f"{SWEEP_RUNS} random schedules, seed 0; 3 of 3 shard(s)" in merged.stdout, merged.stdout
    assert (volume / "merged" / "report.html").is_file()

    unsharded = tmp_path / "unsharded"
    unsharded.mkdir()
    (unsharded / "session.toml").write_text(sweep_scenario())
    whole = run_job(["killpoint run session.toml --json report.json --runs-dir runs || test $? -eq 1"], unsharded, {})
    assert whole.returncode == 0, whole.stdout + whole.stderr

    def verdicts(report: Path) -> list[tuple[tuple[str, ...], str]]:
        return sorted((tuple(run["schedule"]), run["outcome"]) for run in json.loads(report.read_text())["runs"])

    merged_runs = verdicts(volume / "merged" / "report.json")
    assert merged_runs == verdicts(unsharded / "report.json") and len(merged_runs) == SWEEP_RUNS
    assert {outcome for _, outcome in merged_runs} == {"passed", "failed"}, merged_runs
