"""``npx PACKAGE ...`` resolved once per certify session (``harness/certify/npx.py``), never breaking a command.

The parsing and npm's bin rule are checked in-process; resolution itself runs a
stand-in ``npx`` (a shell script printing the PATH npx would give), so it
needs no network; the last test certifies the real npm filesystem server both
ways (through npx at every start, and resolved once) and needs npx and the
registry (or npm's cache), skipping without them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.harness.certify import npx
from tests.helpers import ROOT

PACKAGE = "@modelcontextprotocol/server-filesystem@2026.8.31"


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    npx.forget()
    yield
    npx.forget()


@pytest.mark.parametrize("argv", [
    ["node", "server.js", "{world}"],
    ["/usr/bin/python3", "-m", "npx", "{world}"],
    ["uvx", "mcp-server-git", "--repository", "{world}"],
    ["npx"],
    ["npx", "-y"],
    ["npx", "--registry", "http://example", "pkg", "{world}"],  # a flag not known here
    ["npx", "-y", "./local/server", "{world}"],                  # a path, not a registry spec
    ["npx", "-y", "github:owner/repo", "{world}"],
    ["npx", "-y", "{world}/pkg"],
    ["npx", "-y", "-p", "pkg", "./bin.js", "{world}"],
])
def test_anything_but_a_plain_npx_command_is_left_as_written(argv: list[str]) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp/x"}
    assert npx.form(argv) is None
    started_argv, started_env = npx.started(argv, Path("/"), env)
    assert started_argv is argv and started_env is env


def test_the_plain_forms_are_split_into_what_is_resolved_and_the_rest() -> None:
    split = npx.form(["/usr/bin/npx", "-y", f"{PACKAGE}", "{world}", "--flag"])
    assert split == npx.Form(("/usr/bin/npx", "-y", PACKAGE), (PACKAGE,), None, ("{world}", "--flag"))
    split = npx.form(["npx", "--yes", "--package=a@1", "-p", "@s/b", "--", "tool", "{world}"])
    assert split == npx.Form(("npx", "--yes", "--package=a@1", "-p", "@s/b", "--", "tool"), ("a@1", "@s/b"), "tool",
                             ("{world}",))


def test_the_bin_is_picked_as_npm_picks_it() -> None:
    assert npx.bin_of({"name": "@s/tool", "bin": "dist/index.js"}) == "tool"
    assert npx.bin_of({"name": "@s/tool", "bin": {"other": "a.js"}}) == "other"
    assert npx.bin_of({"name": "@s/tool", "bin": {"x": "a.js", "y": "a.js"}}) == "x"  # aliases of one file
    assert npx.bin_of({"name": "@s/tool", "bin": {"x": "a.js", "tool": "b.js"}}) == "tool"
    assert npx.bin_of({"name": "@s/tool", "bin": {"x": "a.js", "y": "b.js"}}) is None
    assert npx.bin_of({"name": "tool"}) is None


def fake_npx(folder: Path, *, fail: bool = False) -> Path:
    """A stand-in npx: it logs each run, and for ``-c`` prints a PATH whose first entry holds ``pkg``'s bin."""
    modules = folder / "cache" / "node_modules"
    (modules / "pkg").mkdir(parents=True)
    (modules / "pkg" / "package.json").write_text(json.dumps({"name": "pkg", "bin": {"pkg-server": "server.sh"}}))
    (modules / "pkg" / "server.sh").write_text("#!/bin/sh\nexit 0\n")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "pkg-server").symlink_to("../pkg/server.sh")
    (modules / "pkg" / "server.sh").chmod(0o755)
    script = folder / "bin" / "npx"
    script.parent.mkdir()
    body = "echo 'npm error 404 pkg is not in this registry' >&2; exit 1" if fail else \
        f'printf "%s\\n" "{modules / ".bin"}:$PATH"'
    log = folder / "runs.log"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\n{body}\n')
    script.chmod(0o755)
    return script


@pytest.mark.integration
def test_an_npx_command_is_resolved_once_to_the_bin_npx_would_run(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    script = fake_npx(tmp_path)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    for world in ("w1", "w2", "w3"):
        argv, started_env = npx.started([str(script), "-y", "pkg@1.0.0", world], tmp_path, env)
        assert argv == [str(tmp_path / "cache/node_modules/.bin/pkg-server"), world]
        assert started_env["PATH"] == f"{tmp_path / 'cache/node_modules/.bin'}:/usr/bin:/bin"
        assert started_env["HOME"] == env["HOME"]
    assert (tmp_path / "runs.log").read_text().splitlines() == ['-y --package=pkg@1.0.0 -c printf "%s\\n" "$PATH"']
    assert "resolved once" in capsys.readouterr().err


@pytest.mark.integration
def test_a_failing_resolution_falls_back_to_the_command_as_written(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    script = fake_npx(tmp_path, fail=True)
    env = {"PATH": "/usr/bin:/bin"}
    for world in ("w1", "w2"):
        argv = [str(script), "-y", "pkg", world]
        assert npx.started(argv, tmp_path, env) == (argv, env)
    assert len((tmp_path / "runs.log").read_text().splitlines()) == 1  # the failure is not retried at every start
    err = capsys.readouterr().err
    assert "not resolved once" in err and "404" in err and "as written" in err


@pytest.mark.integration
def test_resolution_can_be_switched_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = fake_npx(tmp_path)
    monkeypatch.setenv(npx.SWITCH, "0")
    argv, env = [str(script), "-y", "pkg", "w"], {"PATH": "/usr/bin:/bin"}
    assert npx.started(argv, tmp_path, env) == (argv, env)
    assert not (tmp_path / "runs.log").exists()


@pytest.mark.integration
def test_the_real_filesystem_server_gets_the_same_certificate_resolved_once(tmp_path: Path) -> None:
    """write_file, one draw with its kills: as written (npx at every start) and resolved once, the same verdict."""
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed")
    probe = subprocess.run(["npx", "-y", f"--package={PACKAGE}", "-c", "true"], capture_output=True, timeout=300,
                           check=False)
    if probe.returncode != 0:
        pytest.skip(f"npx cannot install {PACKAGE} here: {probe.stderr.decode(errors='replace')[-200:]}")
    results = {}
    for switch in ("0", "1"):
        out = tmp_path / f"out-{switch}"
        done = subprocess.run([str(ROOT / ".venv/bin/killpoint"), "certify", "--mcp", f"npx -y {PACKAGE} {{world}}",
                               "--tool", "write_file", "--seed", "0", "--trials", "1", "--out", str(out)],
                              cwd=ROOT, env={**os.environ, npx.SWITCH: switch}, capture_output=True, text=True,
                              timeout=600, check=False)
        certificate = json.loads((out / "write_file.json").read_text())
        results[switch] = (done.returncode, certificate["verdict"], certificate["strongest_supported"])
        assert ("resolved once" in done.stderr) == (switch == "1"), done.stderr
    assert results["0"] == results["1"]
