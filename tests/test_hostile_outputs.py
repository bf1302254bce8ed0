"""Where a command writes, and what it reads back from its own outputs: an output flag naming a file where a folder
goes (or a folder where a file goes) is refused before any work (exit 2, naming the flag); a certificate folder
holding a FIFO or a link to /dev/zero is reported, never waited on; a run directory's stage that is a symlink
loop is refused as a FIFO there is; text no output can encode is escaped, not a traceback; and a hunt whose
workload cannot run a single example is a workload error, never a pass.

Each case runs the CLI in-process, under ``test_hostile_inputs``' deadline and memory cap where a hang or an
unbounded read was the bug.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from pathlib import Path
from typing import TextIO

import pytest

from killpoint.harness.frontends import cli
from tests.helpers import DEMO
from tests.test_hostile_inputs import NOT_FILES, deadline_and_memory_cap
from tests.test_show_inputs import started_run, verdict_json

pytestmark = pytest.mark.hostile

TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
APPEND = ("certify", "append", "--claim", "NON_IDEMPOTENT", "--trials", "1", "--no-kill")


def killpoint(*argv: str | Path, out: TextIO | None = None) -> tuple[int, str, str]:
    """``killpoint ARGV`` in-process within the deadline and memory cap: (exit code, stdout, stderr)."""
    out = out if out is not None else io.StringIO()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), deadline_and_memory_cap():
        code = cli.main([str(arg) for arg in argv], out=out)
    shown = out.getvalue() if isinstance(out, io.StringIO) else ""
    assert not TRACEBACK.search(err.getvalue() + shown), err.getvalue()[-2000:]
    return code, shown, err.getvalue()


def refused(*argv: str | Path) -> str:
    """``killpoint ARGV`` must be bad input (exit 2): its stderr."""
    code, _, err = killpoint(*argv)
    assert code == 2, (code, err[-2000:])
    return err


@pytest.fixture
def nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A session, hunt or certification that starts is a bug of the checks before it: it raises (exit 4)."""
    import killpoint.harness.certify.run as certify_run
    import killpoint.harness.frontends.spec as spec
    import killpoint.harness.schedules.hunt as hunt

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the output was accepted and work started")

    for module, name in ((spec, "run_session"), (hunt, "hunt"), (certify_run, "certify")):
        monkeypatch.setattr(module, name, started)


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory, holding a regular file ``afile`` and a folder ``folder``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "folder").mkdir()
    return tmp_path


# --- certify --check: a certificate that is no regular file of bounded size

@pytest.mark.parametrize("kind", ["fifo", "linked-dev-zero", "socket", "directory"])
def test_a_certificate_that_is_no_regular_file_is_reported_not_read(tmp_path, kind):
    make, _ = NOT_FILES[kind]
    make(tmp_path, "x.json")
    code, out, _ = killpoint("certify", "--check", tmp_path)
    assert code == 1
    assert re.search(r"^x +\? +not a killpoint certificate$", out, re.MULTILINE), out
    assert f"1 certificate(s), 1 stale, refuted or uncheckable in {tmp_path}" in out


def test_a_certificate_past_the_size_limit_is_not_read(tmp_path):
    from killpoint._input_files import DOCUMENT_LIMIT_BYTES

    with (tmp_path / "x.json").open("wb") as stream:
        stream.truncate(DOCUMENT_LIMIT_BYTES + 1)  # sparse: no room on disk
    code, out, _ = killpoint("certify", "--check", tmp_path)
    assert code == 1 and "not a killpoint certificate" in out


# --- certify's outputs, before any trial

@pytest.mark.parametrize(("argv", "said"), [
    (("--out", "certs", "--write-catalogue", "folder"), "--write-catalogue folder: is a folder; give the file to "
                                                         "write, e.g. folder/catalogue.toml"),
    (("--out", "certs", "--write-catalogue", "afile/catalogue.toml"), "--write-catalogue afile/catalogue.toml: afile "
                                                                      "is a file, not a folder"),
    (("--out", "afile"), "--out afile: afile is a file, not a folder"),
    (("--out", "afile/certs"), "--out afile/certs: afile is a file, not a folder"),
])
def test_certify_refuses_an_output_it_cannot_write_before_any_trial(folder, nothing_runs, argv, said):
    err = refused(*APPEND, *argv)
    assert "output(s) cannot be written; nothing was run" in err and said in err, err


@pytest.mark.parametrize("kind", ["fifo", "directory", "socket", "loop"])
def test_certify_refuses_a_certificate_file_it_cannot_write_before_any_trial(folder, nothing_runs, kind):
    certs = folder / "certs"
    certs.mkdir()
    if kind == "loop":
        (certs / "append.json").symlink_to("append.json")
    else:
        NOT_FILES[kind][0](certs, "append.json")
    err = refused(*APPEND, "--out", certs)
    assert f"--out {certs}: 1 certificate(s) cannot be written there; nothing was run" in err
    assert f"{certs / 'append.json'}: is " in err and "give --out another folder" in err


# --- repro, hunt: their folders, checked as run checks its own

def demo_token() -> str:
    from killpoint.harness.config.scenario import load_scenario
    from killpoint.harness.execute.session import token_for
    from killpoint.harness.model import Job, Verdict, parse_kill

    return token_for(load_scenario(DEMO), Job(0, (parse_kill("c1:after_effect"),)), Verdict(None))


@pytest.mark.parametrize(("runs_dir", "said"), [
    ("afile", "--runs-dir afile: afile is a file, not a folder"),
    ("afile/runs", "--runs-dir afile/runs: afile is a file, not a folder"),
])
def test_repro_refuses_a_runs_dir_it_cannot_make_before_running(folder, nothing_runs, runs_dir, said):
    err = refused("repro", "--backend", "subprocess", "--runs-dir", runs_dir, "--", demo_token())
    assert said in err, err


def test_repro_refuses_a_default_runs_dir_it_cannot_make_before_running(folder):
    """With no --runs-dir a session's folder goes in ./killpoint-runs: a file there is named, not a traceback."""
    (folder / "killpoint-runs").write_text("")
    err = refused("repro", "--backend", "subprocess", demo_token())
    assert "--runs-dir killpoint-runs/" in err and "cannot be made (Not a directory); give a folder" in err, err


def test_hunt_refuses_an_out_it_cannot_write_before_hunting(folder, nothing_runs):
    err = refused("hunt", DEMO, "--examples", "1", "--out", "afile")
    assert "--out afile: afile is a file, not a folder" in err, err


@pytest.mark.integration
def test_a_hunt_whose_workload_runs_no_example_is_a_workload_error_not_a_pass(folder, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(folder))  # the hunt's folder, kept as the evidence, lands here
    err = refused("hunt", DEMO, "--workload", "true", "--examples", "1", "--out", "out")
    assert "hunt: none of the 1 example(s) could be run: workload error: 'true' could not run the plan even " \
           "without a crash" in err, err
    evidence = Path(re.findall(r"Evidence: (\S+)", err)[-1])
    assert evidence.is_relative_to(folder) and evidence.is_dir()
    assert not (folder / "out").exists()


# --- show: what a run directory holds, shown whatever text it holds

def test_show_prints_a_lone_surrogate_escaped_not_a_traceback(tmp_path):
    """A lone surrogate is valid JSON ("\\ud800") that no UTF-8 output can encode."""
    (tmp_path / "verdict.json").write_text(json.dumps(verdict_json(token="kp1.\ud800")))
    written = io.BytesIO()
    stdout = io.TextIOWrapper(written, encoding="utf-8")  # what a terminal or a pipe is: strict UTF-8
    code, _, err = killpoint("show", tmp_path, out=stdout)
    stdout.flush()
    assert code == 0, err
    assert b"reproduce: " in written.getvalue() and b"kp1.\\ud800" in written.getvalue()


@pytest.mark.parametrize("name", ["run.json", "verdict.json", "incarnations.json", "interrupted.json"])
@pytest.mark.parametrize("link", ["itself", "nowhere"])
def test_show_refuses_a_stage_that_is_a_symlink_loop_or_leads_nowhere(tmp_path, name, link):
    """Path.exists calls either absent; show refused a FIFO, a socket or a folder there, and must refuse these too."""
    run_dir = started_run(tmp_path)
    if name == "run.json":  # shown from verdict.json alone when run.json is absent
        (run_dir / "verdict.json").write_text(json.dumps(verdict_json()))
    (run_dir / name).unlink(missing_ok=True)
    (run_dir / name).symlink_to(name if link == "itself" else "no-such-file")
    err = refused("show", run_dir)
    assert f"{run_dir / name}: cannot be read ({name} is a symlink; it was not followed)" in err, err
