"""Shared test helpers: example inventories and real-program requirements."""

from __future__ import annotations

import os
import re
import shutil
import socketserver
import sys
from pathlib import Path

import pytest
import repo_guard
from typer.testing import CliRunner

# Watch the reference data beside the repository from the first import on: a test that
# reads it would pass here and fail from a clone (tests/repo_guard.py, tests/data/).
repo_guard.install()

pytest_plugins = ["group_times"]  # `pytest --group-times` (docs/testing.md)


def _serve_forever(self: socketserver.BaseServer, poll_interval: float = 0.02) -> None:
    _stdlib_serve_forever(self, poll_interval)


# The tests' own servers (fakes of the API server, BMCs, web servers) run
# socketserver's serve_forever() in a thread and stop with shutdown(), which
# waits until the loop looks at its flag again: every poll_interval, 0.5 s by
# default. That is half a second at the end of each test that stops a server
# (155 of them in test_kubeconfig_input.py alone); polled every 20 ms, the
# stop is immediate. Any server started in the tests gets it, also new ones.
_stdlib_serve_forever = socketserver.BaseServer.serve_forever
socketserver.BaseServer.serve_forever = _serve_forever  # type: ignore[method-assign]

ROOT = Path(__file__).resolve().parent.parent
INVENTORIES = ROOT / "inventories"
EXAMPLES = ["dgxpod", "compact", "legacy-4.3", "racks"]
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(program: str) -> str:
    """Absolute path of a real program; under CI=true its absence fails the test."""
    found = shutil.which(program) or next(
        (p for d in ("/usr/sbin", "/sbin") if os.access(p := f"{d}/{program}", os.X_OK)), None
    )
    if found:
        return found
    message = f"{program} is not installed (make system-deps installs it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_root(what: str) -> None:
    """Network namespaces and taps need root; under CI=true not being root fails."""
    if os.geteuid() != 0:
        if IN_CI:
            pytest.fail(f"{what} needs root")
        pytest.skip(f"{what} needs root")


_reads_reported = 0


def pytest_collection_finish(session: pytest.Session) -> None:
    # Reads while importing test modules belong to no test: pytest_sessionfinish reports them.
    global _reads_reported
    _reads_reported = len(repo_guard.READS)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Fail the phase (setup, call, teardown) of a test that opened the reference data beside the repo."""
    global _reads_reported
    report: pytest.TestReport = yield
    if len(repo_guard.READS) > _reads_reported:
        new = repo_guard.READS[_reads_reported:]
        _reads_reported = len(repo_guard.READS)
        if not report.failed:
            report.outcome = "failed"
            report.longrepr = _shared_reads_message(new)
    return report


def _shared_reads_message(reads: list[str]) -> str:
    names = sorted({os.path.relpath(p, repo_guard.SHARED.parent) for p in reads})
    return (f"read outside the repository ({', '.join(names)}): a clone has no ../shared; "
            "use the facts in tests/data/ (tests/data/extract.py writes them)")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Reads at import or collection time belong to no test: fail the session for them.
    if repo_guard.READS and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(_shared_reads_message(repo_guard.READS), red=True)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def kube(tmp_path: Path):
    """The FAKE Kubernetes API server (tests/fake_apiserver.py) on a loopback port, stopped after the test."""
    from fake_apiserver import FakeApiServer

    server = FakeApiServer(tmp_path / "kube").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    """A real sshd on a loopback port (tests/pushkit.py), shared by a test module."""
    from pushkit import start_sshd

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.proc.terminate()
    server.proc.wait(timeout=10)


@pytest.fixture
def example_dir(tmp_path: Path) -> Path:
    """A writable copy of inventories/ (tests edit inventories and their files)."""
    dest = tmp_path / "inventories"
    shutil.copytree(INVENTORIES, dest)
    return dest


def table_row(output: str, *cells: str) -> bool:
    """A row of a plain (piped) table starting with `cells`: columns are two or more spaces apart."""
    want = list(cells)
    return any(re.split(r"\s{2,}", line.strip())[:len(want)] == want for line in output.splitlines())


def inventory_path(name: str) -> Path:
    return INVENTORIES / f"{name}.yaml"


FAKES = ROOT / "tests" / "fakes"
FAKE_OPENSHIFT_INSTALL = FAKES / "openshift-install"


@pytest.fixture
def fake_openshift_install(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The FAKE openshift-install (tests/fakes), found through $UPI_OPENSHIFT_INSTALL.

    It needs PyYAML, so this interpreter's bin/ goes first on PATH for its
    `#!/usr/bin/env python3`. Set FAKE_OPENSHIFT_INSTALL_VERSION to change its release.
    """
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("UPI_OPENSHIFT_INSTALL", str(FAKE_OPENSHIFT_INSTALL))
    monkeypatch.delenv("FAKE_OPENSHIFT_INSTALL_VERSION", raising=False)
    return FAKE_OPENSHIFT_INSTALL


def require_path(path: str, what: str) -> Path:
    """A file or device a real-program test needs; under CI=true its absence fails the test."""
    if Path(path).exists():
        return Path(path)
    message = f"{path} ({what}) is missing (make system-deps installs it)"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/ from a fresh render instead of comparing")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def tls(tmp_path: Path):
    """A test CA and a certificate for 127.0.0.1, on disk: for the Redfish peers (redfish_support)."""
    from redfish_support import make_tls

    return make_tls(tmp_path / "tls")


@pytest.fixture
def ami(tls):
    """The DGX (AMI) BMC fake on a loopback HTTPS port (redfish_support.AmiFake)."""
    from redfish_support import AmiFake

    fake = AmiFake(tls)
    yield fake
    fake.stop()
