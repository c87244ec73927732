"""README's two commands on a bare machine: the test command installs what its tests need.

``scripts/system-packages.sh`` is the one place a Debian package is installed (set-up:
SimGrid; the test command: Chromium and its driver for tests/test_report_browser.py), only when
missing; ``.ci/run`` is nothing but README's test command, so CI proves the README.  apt-get
and sudo are replaced by recording stand-ins on PATH here (the real apt-get would need root and
a network); dpkg-query is the machine's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "system-packages.sh"
NOT_INSTALLED = "distrepro-no-such-package"


def _fake_bin(tmp_path, uid: int):
    """apt-get, sudo and id stand-ins that log their arguments; dpkg-query stays the real one."""
    if not shutil.which("dpkg-query"):
        pytest.fail("dpkg-query is missing: scripts/system-packages.sh needs a Debian machine")
    bindir, log = tmp_path / "bin", tmp_path / "calls.log"
    bindir.mkdir()
    for name, body in {"apt-get": f'echo "apt-get $*" >> {log}',
                       "sudo": f'echo "sudo $1" >> {log}; "$@"',
                       "id": f'[ "$1" = -u ] && echo {uid} || exec /usr/bin/id "$@"'}.items():
        (bindir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bindir / name).chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}"}, log


def _calls(log) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_installed_packages_run_no_apt(tmp_path):
    env, log = _fake_bin(tmp_path, uid=0)
    proc = subprocess.run(["bash", str(SCRIPT), "bash", "coreutils"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert _calls(log) == []


@pytest.mark.parametrize("uid,prefix", [(0, []), (1000, ["sudo apt-get"])])
def test_missing_packages_are_installed_after_an_update_through_sudo_when_not_root(tmp_path, uid, prefix):
    env, log = _fake_bin(tmp_path, uid=uid)
    proc = subprocess.run(["bash", str(SCRIPT), "bash", NOT_INSTALLED], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    calls = [c for c in _calls(log) if not c.startswith("sudo")]
    assert calls == ["apt-get update -qq", f"apt-get install -y -qq --no-install-recommends {NOT_INSTALLED}"]
    assert [c for c in _calls(log) if c.startswith("sudo")] == prefix * 2


def test_no_apt_get_is_one_clear_error(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dpkg-query", "id"):  # a PATH with no apt-get
        (bindir / tool).symlink_to(shutil.which(tool))
    proc = subprocess.run([str(bindir / "bash"), str(SCRIPT), NOT_INSTALLED], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(bindir)})
    assert proc.returncode == 1
    assert f"install the Debian packages {NOT_INSTALLED}" in proc.stderr


def _readme_test_command() -> str:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    line = next(x for x in block.splitlines() if "test" in x)
    return line.split("#")[0].strip()


def test_ci_runs_nothing_but_the_readme_test_command():
    assert _readme_test_command() == "bash scripts/test.sh"
    commands = [x.strip() for x in (ROOT / ".ci" / "run").read_text().splitlines()
                if x.strip() and not x.lstrip().startswith("#")]
    assert commands == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', _readme_test_command()]


def test_the_test_command_installs_the_browser_the_browser_test_asks_for():
    """The packages tests/test_report_browser.py names when the browser is missing are the
    ones scripts/test.sh installs (before any test runs), and set-up installs SimGrid the same way."""
    wanted = re.search(r'apt-get install -y ([\w\- ]+?) *"', (ROOT / "tests" / "test_report_browser.py").read_text())
    test_sh = (ROOT / "scripts" / "test.sh").read_text()
    installs = re.findall(r"^[^#\n]*bash scripts/system-packages\.sh ([\w\- ]+)", test_sh, re.M)
    assert installs and set(installs[0].split()) == set(wanted.group(1).split()) == {"chromium", "chromium-driver"}
    assert test_sh.index("|| bash scripts/system-packages.sh") < test_sh.index("python -m pytest -q \"$@\"")
    assert re.search(r"^bash scripts/system-packages\.sh python3-simgrid$",
                     (ROOT / "scripts" / "setup.sh").read_text(), re.M)
    # one place installs Debian packages: no other script runs apt-get itself
    others = [p for p in [*(ROOT / "scripts").glob("*.sh"), ROOT / ".ci" / "run"] if p != SCRIPT]
    assert [p.name for p in others if re.search(r"^[^#]*apt-get", p.read_text(), re.M)] == []
