"""What every command shares (upi/cli/base.py): help, JSON errors, durations, log level, version.

The command tree is walked, so a command added later is held to the same
conventions without a line here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from conftest import ROOT, inventory_path
from test_broken_inventories import CASES, _broken
from test_one_worker import _drop_workers_but_one

from upi import __version__
from upi.cli import app
from upi.cli.base import duration_text, parse_duration

UPI = Path(sys.executable).with_name("upi")


def _leaves(cmd: Any = None, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    cmd = cmd or typer.main.get_command(app)
    subs = getattr(cmd, "commands", None)
    if not subs:
        return [(path, cmd)]
    return [leaf for name, sub in subs.items() for leaf in _leaves(sub, (*path, name))]


LEAVES = _leaves()
JSON_COMMANDS = [(p, c) for p, c in LEAVES if any("--json" in getattr(o, "opts", ()) for o in c.params)]


def _ids(items: list[tuple[tuple[str, ...], Any]]) -> list[str]:
    return [" ".join(p) for p, _ in items]


def _help(runner, path: tuple[str, ...]) -> str:
    result = runner.invoke(app, [*path, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(("path", "cmd"), LEAVES, ids=_ids(LEAVES))
def test_help_has_no_type_placeholders(runner, path, cmd) -> None:
    text = _help(runner, path)
    assert not re.search(r"<[a-z ]+>", text), text  # <int range>, <path>, <float range>
    assert not re.search(r"\{[A-Z_]+\}", text), text  # {INVENTORY}
    assert "Examples:" in text or "Example:" in text, f"upi {' '.join(path)} has no example"


@pytest.mark.parametrize(("path", "cmd"), LEAVES, ids=_ids(LEAVES))
def test_every_option_shows_its_default(runner, path, cmd) -> None:
    _help(runner, path)
    ctx = cmd.make_context(path[-1], [], resilient_parsing=True)
    for param in cmd.params:
        if param.param_type_name != "option" or param.is_flag or param.required or param.hidden:
            continue
        _, text = param.get_help_record(ctx)
        assert "default" in text.lower(), f"upi {' '.join(path)} {param.opts[0]}: no default shown: {text}"


TIME_WORDS = re.compile(r"timeout|deadline|poll|pause|interval|wait-for|delay")


@pytest.mark.parametrize(("path", "cmd"), LEAVES, ids=_ids(LEAVES))
def test_every_time_option_takes_a_duration(path, cmd) -> None:
    for param in cmd.params:
        if param.param_type_name == "option" and not param.is_flag and TIME_WORDS.search(param.opts[0]):
            assert param.metavar == "DURATION", f"upi {' '.join(path)} {param.opts[0]}: use duration_option"


def test_the_commands_with_json_are_the_ones_scripts_need() -> None:
    names = {" ".join(p) for p, _ in JSON_COMMANDS}
    assert {"validate", "push", "check dns", "check all", "boot-vms", "approve-csr", "wait", "gpu",
            "version"} <= names


def _required_args(cmd: Any, inventory: Path) -> list[str]:
    args: list[str] = []
    for param in cmd.params:
        if param.param_type_name == "argument" and not args:
            args.append(str(inventory))
        elif param.param_type_name == "argument" and "|" in (param.metavar or ""):
            args.append(param.metavar.split()[-1].split("|")[0])  # an action word: `status`
        elif param.required:  # a directory that exists: the inventory is what is wrong
            (inventory.parent / "given").mkdir(exist_ok=True)
            args += [param.opts[0], str(inventory.parent / "given")]
    return args


def _json_error(result) -> dict[str, Any]:
    doc = json.loads(result.stdout)
    assert {"error", "file", "line", "field"} <= set(doc), doc
    assert doc["exit_code"] == result.exit_code
    return doc


@pytest.mark.parametrize(("path", "cmd"), JSON_COMMANDS, ids=_ids(JSON_COMMANDS))
def test_json_usage_error_is_a_json_object_with_the_same_exit_code(runner, path, cmd) -> None:
    plain = runner.invoke(app, [*path, "--no-such-flag"])
    result = runner.invoke(app, [*path, "--json", "--no-such-flag"])
    assert plain.exit_code == result.exit_code == 2
    doc = _json_error(result)
    assert "--no-such-flag" in doc["error"]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("path", "cmd"), [(p, c) for p, c in JSON_COMMANDS if p != ("version",)],
                         ids=_ids([(p, c) for p, c in JSON_COMMANDS if p != ("version",)]))
def test_json_inventory_error_names_file_line_and_field(runner, tmp_path: Path, path, cmd) -> None:
    case = next(c for c in CASES if c.id == "bad-mac")
    inventory = _broken(tmp_path, case)
    args = [*path, *_required_args(cmd, inventory)]
    plain = runner.invoke(app, args)
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == plain.exit_code == 2, result.output
    doc = _json_error(result)
    assert (doc["file"], doc["line"], doc["field"]) == (str(inventory), case.line, case.field)
    assert case.fragment in doc["error"] and case.fragment in doc["message"]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("path", "cmd"), [(p, c) for p, c in JSON_COMMANDS if p != ("version",)],
                         ids=_ids([(p, c) for p, c in JSON_COMMANDS if p != ("version",)]))
def test_json_missing_inventory_is_a_json_object(runner, tmp_path: Path, path, cmd) -> None:
    missing = tmp_path / "nope.yaml"
    result = runner.invoke(app, [*path, *_required_args(cmd, missing), "--json"])
    assert result.exit_code == 2, result.output
    doc = _json_error(result)
    assert doc["file"] == str(missing) and "no such inventory file" in doc["error"]


def test_json_lists_every_problem_of_the_inventory(runner, tmp_path: Path) -> None:
    text = inventory_path("dgxpod").read_text()
    text = text.replace('"52:54:00:21:03:50"', '"nope"').replace("host_prefix: 23", "host_prefix: 40")
    path = _broken(tmp_path, CASES[0].__class__("many", "", "", 0, None, ""))
    path.write_text(text)
    result = runner.invoke(app, ["validate", str(path), "--json"])
    assert result.exit_code == 2
    doc = _json_error(result)
    assert doc["error"].startswith("the inventory has 2 problems")
    assert [(p["line"], p["field"]) for p in doc["problems"]] == [(13, "network.host_prefix"),
                                                                  (32, "nodes[1].mac")]


def test_json_bad_duration_names_the_option(runner) -> None:
    inv = str(inventory_path("dgxpod"))
    result = runner.invoke(app, ["check", "dns", inv, "--timeout", "soon", "--json"])
    assert result.exit_code == 2
    doc = _json_error(result)
    assert doc["field"] == "--timeout"
    assert "'soon' is not a duration: write 90s, 30m, 2h or 1h30m (a bare number counts in seconds)" \
        in doc["error"]


def test_a_failed_check_with_json_prints_one_document(runner) -> None:
    # Nothing listens on these loopback ports: every LB probe fails fast (connection refused).
    ports = [f"{p}={q}" for p, q in ((6443, 1), (22623, 2), (443, 3), (80, 4))]
    args = ["check", "lb", str(inventory_path("dgxpod")), "--server", "127.0.0.1", "--timeout", "1s",
            "--retries", "0", "--json"]
    for mapping in ports:
        args += ["--port-map", mapping]
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)  # one document: the report, no error object after it
    assert "error" not in doc


@pytest.mark.parametrize(("text", "unit", "seconds"), [
    ("90s", "m", 90), ("30m", "s", 1800), ("2h", "s", 7200), ("1h30m", "s", 5400), ("500ms", "s", 0.5),
    ("45", "m", 2700), ("10", "s", 10), ("1.5", "h", 5400), ("2H", "s", 7200), (" 5m ", "s", 300),
])
def test_durations_take_one_form_and_a_bare_number_keeps_its_unit(text, unit, seconds) -> None:
    assert parse_duration(text, unit) == seconds


@pytest.mark.parametrize("text", ["", "m", "5 m", "1d", "-5s", "5m30", "five", "1e3"])
def test_a_duration_that_is_not_one_is_refused(text) -> None:
    with pytest.raises(ValueError, match="is not a duration"):
        parse_duration(text, "s")


@pytest.mark.parametrize(("seconds", "text"), [(3600, "1h"), (90, "1m30s"), (5, "5s"), (0.05, "0.05s"),
                                               (5400, "1h30m"), (0, "0s")])
def test_defaults_are_shown_as_durations(seconds, text) -> None:
    assert duration_text(seconds) == text
    assert parse_duration(text, "m") == seconds


def test_gpu_timeout_in_minutes_and_durations_reach_the_library(runner, monkeypatch) -> None:
    seen: dict[str, Any] = {}

    def fake_gpu_command(inventory, **kwargs):
        seen.update(kwargs)
        return type("Report", (), {"ok": True})()

    monkeypatch.setattr("upi.commands.gpu.gpu_command", fake_gpu_command)
    inv = str(inventory_path("dgxpod"))
    assert runner.invoke(app, ["gpu", inv, "--dry-run", "--timeout", "45"]).exit_code == 0
    assert seen["timeout_minutes"] == 45 and seen["poll"] == 5.0
    assert runner.invoke(app, ["gpu", inv, "--dry-run", "--timeout", "2h", "--poll", "1m"]).exit_code == 0
    assert seen["timeout_minutes"] == 120 and seen["poll"] == 60


def test_wait_deadline_bare_number_is_minutes(runner, monkeypatch) -> None:
    seen: list[Any] = []
    def fake_wait_command(req, **_):
        seen.append(req)
        return type("Summary", (), {"ok": True})()

    monkeypatch.setattr("upi.commands.wait.wait_command", fake_wait_command)
    inv = str(inventory_path("dgxpod"))
    for value, minutes in (("180", 180), ("3h", 180), ("90s", 1.5)):
        args = ["wait", inv, "--dir", "assets", "--deadline", value, "--retry-pause", "1m"]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert seen[-1].deadline_minutes == minutes and seen[-1].retry_pause == 60
    result = runner.invoke(app, ["wait", inv, "--dir", "assets", "--gpu", "--gpu-timeout", "90",
                                 "--gpu-poll", "2s"])
    assert result.exit_code == 0, result.output
    assert (seen[-1].gpu_timeout, seen[-1].gpu_poll) == (90, 2)


def test_log_level_error_hides_warnings_and_default_shows_them(runner, example_dir: Path, tmp_path) -> None:
    inventory, _ = _drop_workers_but_one(example_dir / "dgxpod.yaml")
    shown = runner.invoke(app, ["validate", str(inventory)])
    hidden = runner.invoke(app, ["--log-level", "error", "validate", str(inventory)])
    assert shown.exit_code == hidden.exit_code == 0
    assert "upi: warning: " in shown.stderr
    assert "upi: warning: " not in hidden.stderr
    assert shown.stdout == hidden.stdout


@pytest.mark.parametrize("flags", [["-v"], ["--log-level", "debug"], ["--log-level", "DEBUG"]])
def test_debug_shows_every_file_and_the_inventory_read(runner, tmp_path: Path, flags) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, [*flags, "render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert f"upi: debug: read the inventory {inventory_path('dgxpod')}: cluster dgxpod.nvidia.com, 6 nodes" \
        in result.stderr
    assert "upi: debug: haproxy/haproxy.cfg: new" in result.stderr
    quiet = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out)])
    assert "debug" not in quiet.stderr


@pytest.mark.parametrize("flags", [["-v"], ["--verbose"], ["--log-level", "debug"]])
def test_the_log_level_may_also_follow_the_command(runner, tmp_path: Path, flags) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, ["render", str(inventory_path("dgxpod")), "-o", str(out), *flags])
    assert result.exit_code == 0, result.output
    assert "upi: debug: haproxy/haproxy.cfg: new" in result.stderr
    # In both places the command's wins: the root asked for errors only.
    both = runner.invoke(app, ["--log-level", "error", "render", str(inventory_path("dgxpod")),
                               "-o", str(tmp_path / "again"), *flags])
    assert "upi: debug: haproxy/haproxy.cfg: new" in both.stderr


def test_every_command_takes_the_log_level_after_its_name(runner, example_dir: Path) -> None:
    for path, _ in LEAVES:
        help_text = runner.invoke(app, [*path, "--help"]).stdout
        assert "--log-level debug|info|warn|error" in help_text and "-v, --verbose" in help_text, path
    inventory, _ = _drop_workers_but_one(example_dir / "dgxpod.yaml")
    quiet = runner.invoke(app, ["validate", str(inventory), "--log-level", "error"])
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    bad = runner.invoke(app, ["validate", str(inventory), "--log-level", "loud"])
    assert bad.exit_code == 2
    assert "'loud' is not a log level: use one of debug, info, warn, error" in bad.output


def test_debug_shows_the_programs_upi_runs(tmp_path: Path) -> None:
    from upi import console, runner

    console.set_level("debug")
    try:
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            runner.run(["true"], timeout=5)
        assert "upi: debug: run (timeout 5s): true" in err.getvalue()
        assert "upi: debug: true exited 0 after" in err.getvalue()
    finally:
        console.set_level("info")


def test_log_level_from_the_environment_and_refused_when_unknown(runner, example_dir: Path) -> None:
    inventory, _ = _drop_workers_but_one(example_dir / "dgxpod.yaml")
    quiet = runner.invoke(app, ["validate", str(inventory)], env={"UPI_LOG_LEVEL": "error"})
    assert quiet.exit_code == 0 and "warning" not in quiet.stderr
    bad = runner.invoke(app, ["--log-level", "loud", "validate", str(inventory)])
    assert bad.exit_code == 2
    assert "'loud' is not a log level: use one of debug, info, warn, error" in bad.output


def test_version_flag_and_version_command(runner) -> None:
    flag = runner.invoke(app, ["--version"])
    assert (flag.exit_code, flag.stdout) == (0, f"upi {__version__}\n")
    doc = json.loads(runner.invoke(app, ["version", "--json"]).stdout)
    assert doc["version"] == __version__
    assert doc["python"] == ".".join(map(str, sys.version_info[:3]))


def test_installed_upi_runs_from_path_and_reports_itself(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{UPI.parent}:/usr/bin:/bin"}
    out = subprocess.run(["upi", "version", "--json"], env=env, capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, check=True).stdout
    assert json.loads(out)["executable"] == str(UPI)


def test_shell_completion_script_and_completions(tmp_path: Path) -> None:
    script = subprocess.run([str(UPI), "--show-completion", "bash"], capture_output=True, text=True,
                            timeout=60, check=True).stdout
    assert "_UPI_COMPLETE=complete_bash" in script and "complete " in script
    env = {**os.environ, "_UPI_COMPLETE": "complete_bash", "COMP_WORDS": "upi ch", "COMP_CWORD": "1"}
    words = subprocess.run([str(UPI)], env=env, capture_output=True, text=True, timeout=60).stdout.split()
    assert words == ["check"]
    env.update(COMP_WORDS="upi check d", COMP_CWORD="2")
    assert subprocess.run([str(UPI)], env=env, capture_output=True, text=True, timeout=60).stdout.split() \
        == ["dns"]


def test_readme_shows_how_to_install_and_complete() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pipx install ." in readme and "pip install '.[libvirt]'" in readme
    assert "upi --install-completion" in readme


def test_an_error_after_json_lines_is_one_more_line(capsys) -> None:
    from upi import console
    from upi.cli.base import _report
    from upi.errors import ClusterError

    console.reset_output()
    console.print_json_line('{"action":"approved","csr":"csr-1"}')
    assert _report(ClusterError("the API went away"), as_json=True) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(ln).get("error") for ln in lines] == [None, "the API went away"]
    console.reset_output()


# Entry points: they exist to run the CLI (python -m upi; docs/cli.md is generated from its --help).
ENTRY_POINTS = {"upi/__main__.py", "upi/docgen.py"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports, at any depth (lazy imports in functions too), with its line."""
    import ast

    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from upi import cli` imports upi.cli; `from upi.cli import app` names the module.
            found += ([(node.lineno, f"upi.{a.name}") for a in node.names] if node.module == "upi"
                      else [(node.lineno, node.module)])
    return found


def _upward(rel: str, module: str) -> bool:
    def under(name: str) -> bool:
        return module == name or module.startswith(name + ".")

    if rel.startswith("upi/cli/") or rel in ENTRY_POINTS:
        return False
    if rel.startswith("upi/commands/"):
        return under("upi.cli")
    return under("upi.cli") or under("upi.commands")


def test_imports_only_point_down() -> None:
    """DESIGN.md: the library never imports the commands or the CLI, and a command never the CLI."""
    found = []
    for path in sorted((ROOT / "upi").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        found += [f"{rel}:{line}: imports {mod}" for line, mod in _imports(path) if _upward(rel, mod)]
    assert found == [], "imports pointing up a layer:\n" + "\n".join(found)


OUT_COMMANDS = [(p, c) for p, c in LEAVES if any("-o" in getattr(o, "opts", ()) for o in c.params)]


@pytest.mark.parametrize(("path", "cmd"), OUT_COMMANDS, ids=_ids(OUT_COMMANDS))
def test_an_empty_output_dir_is_refused_not_taken_for_the_current_one(
        runner, path, cmd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o ''` would be Path(''), the current directory: every command refuses it (exit 2), writes nothing."""
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, [*path, "-o", ""])
    assert res.exit_code == 2, res.output
    assert "an empty path would mean the current directory" in res.output
    assert list(tmp_path.iterdir()) == []


def test_every_test_that_sends_sigint_gives_its_child_sigint_at_its_default() -> None:
    """tests/childsignals.py: under a shell's background job SIGINT starts ignored, and stays so."""
    sends = re.compile(r"(send_signal|killpg|os\.kill)\([^)]*SIGINT")
    missing = [p.name for p in sorted((ROOT / "tests").glob("*.py"))
               if sends.search(text := p.read_text())
               and not re.search(r"preexec_fn=(with_)?sigint_default", text)
               and "from status_support import" not in text]
    assert missing == [], "send SIGINT to a child without resetting its disposition: " + ", ".join(missing)
