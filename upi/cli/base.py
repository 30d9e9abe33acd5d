"""The Typer app and the conventions every command shares.

- errors: one place maps a UpiError to its message and exit code; with
  `--json` the same error is a JSON object on stdout (docs/cli.md);
- `--log-level` / `-v` on the root, and on every command too (`upi render ... -v`);
- durations (`90s`, `30m`, `2h`; a bare number in the option's own unit);
- help without type placeholders: plain metavars, every default shown.

A new command picks these up by using `app` (or `sub_app`), the option types
below (`InventoryArg`, `JsonOpt`, `duration_option`) and nothing else.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from upi import console
from upi.console import duration_text

# `upi --help` lists the commands in the order of an install, not alphabetically.
WORKFLOW = ["validate", "schema", "render", "ignition", "images", "push", "check", "boot-vms",
            "boot-metal", "power", "approve-csr", "wait", "gpu", "status", "version"]
CONTEXT = {"help_option_names": ["-h", "--help"], "show_default": True}


def wants_json(args: Sequence[str]) -> bool:
    """True when a command line asks for JSON output (`--json` before any `--`)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def error_doc(exc: Exception) -> dict[str, Any]:
    """The JSON object `--json` prints for an error: the first problem's parts, all of them listed."""
    from upi.errors import InventoryError

    if isinstance(exc, InventoryError) and exc.located:
        problems = [{"error": str(p) if p.file else p.message, "message": p.message,
                     "file": p.file or None, "line": p.line, "field": p.field or None}
                    for p in exc.located]
        doc: dict[str, Any] = dict(problems[0])
        if len(problems) > 1:
            doc["error"] = f"the inventory has {len(problems)} problems; the first: {doc['error']}"
            doc["problems"] = problems
        return {**doc, "exit_code": exc.exit_code}
    field = getattr(exc, "field", None)
    param = getattr(exc, "param", None)
    if param is not None:
        field = param.opts[0] if getattr(param, "opts", None) else param.name
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    code = getattr(exc, "exit_code", 1)
    return {"error": message, "message": message, "file": None, "line": None, "field": field,
            "exit_code": code}


def _report(exc: Exception, as_json: bool) -> int:
    """Print `exc` for the user (JSON on stdout with `as_json`); its exit code."""
    from upi.errors import InventoryError

    code: int = getattr(exc, "exit_code", 1)
    # A command that already printed its JSON document (a failed check's report)
    # adds no second one: stdout stays one parseable document.
    if as_json and not console.json_printed():
        console.print_json(error_doc(exc))
    if isinstance(exc, InventoryError) and len(exc.problems) > 1:
        console.error(f"the inventory has {len(exc.problems)} problems:")
        for problem in exc.problems:
            console.say_err(f"  {problem}")
    elif isinstance(exc, InventoryError):
        console.error(exc.problems[0] if exc.problems else str(exc))
    elif as_json or not isinstance(exc, typer.BadParameter | click_usage_error()):
        console.error(exc.format_message() if hasattr(exc, "format_message") else str(exc))
    return code


def click_usage_error() -> type[Exception]:
    """Click's UsageError class (typer ships its own click)."""
    return typer.core._click.exceptions.UsageError  # type: ignore[attr-defined,no-any-return]


class UpiGroup(TyperGroup):
    """Maps every UpiError to its message and exit code: the one place that does."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Commands in workflow order (sub-groups keep their own order)."""
        names = list(super().list_commands(ctx))
        known = [n for n in WORKFLOW if n in names]
        return known + [n for n in names if n not in known]

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a UpiError becomes a message and an exit code.

        With `--json` a usage error (a bad flag value) is reported the same
        way, as a JSON object on stdout; without it click prints its usage.
        """
        from upi.errors import UpiError

        as_json = wants_json([*getattr(ctx, "_protected_args", []), *ctx.args])
        console.reset_output()
        try:
            return super().invoke(ctx)
        except UpiError as exc:
            raise typer.Exit(_report(exc, as_json)) from None
        except click_usage_error() as exc:
            if not as_json:
                raise
            raise typer.Exit(_report(exc, as_json)) from None


# Typer writes a default given as text in parentheses, `[default: (2s)]`.
_PAREN_DEFAULT = re.compile(r"\[default: \(([^()]*)\)")


class UpiCommand(TyperCommand):
    """A command whose help shows plain metavars: `INVENTORY`, not `{INVENTORY}` or `<path>`.

    Every command also takes the root's `--log-level` and `-v` after its name.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(_level_options())

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """`[OPTIONS] INVENTORY`: arguments by their metavar, optional ones in brackets."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = _argument_name(param)
                pieces.append(name if param.required or name.startswith("[") else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        """Arguments (by metavar, with their help) then options."""
        args = [(_argument_name(p), getattr(p, "help", None) or "") for p in self.get_params(ctx)
                if p.param_type_name == "argument" and not getattr(p, "hidden", False)]
        opts = [(rv[0], _PAREN_DEFAULT.sub(r"[default: \1", rv[1])) for p in self.get_params(ctx)
                if p.param_type_name == "option" and (rv := p.get_help_record(ctx)) is not None]
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


def _argument_name(param: Any) -> str:
    if param.metavar:  # written as the help should show it (`[NODE...]`)
        return str(param.metavar)
    name = str(param.name.upper())
    return name + "..." if param.nargs != 1 else name


def adopt(typer_app: typer.Typer) -> None:
    """Give every command registered so far (sub-apps included) the shared command class."""
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = UpiCommand
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            adopt(group.typer_instance)


def sub_app(name: str, *, help: str, epilog: str) -> typer.Typer:  # noqa: A002  (typer's own word)
    """A command group under `upi NAME` with the shared conventions."""
    sub = typer.Typer(cls=UpiGroup, help=help, epilog=epilog, no_args_is_help=True, rich_markup_mode=None,
                      pretty_exceptions_enable=False, context_settings=CONTEXT)
    app.add_typer(sub, name=name)
    return sub


def output_dir(value: str) -> Path:
    """An -o DIR value; '' is refused (pathlib would read it as `.`, the current directory)."""
    if not str(value).strip():
        raise typer.BadParameter("an empty path would mean the current directory: name the "
                                 "directory (e.g. -o out/dgxpod, or -o . for the current one)")
    return Path(value)


# Durations: `90s`, `30m`, `2h`, `1h30m`, `500ms`; a bare number is in the option's unit.
UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
UNIT_WORDS = {"s": "seconds", "m": "minutes", "h": "hours"}
_DURATION = re.compile(r"(?:[0-9]+(?:\.[0-9]+)?(?:ms|s|m|h))+")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def parse_duration(text: str, unit: str) -> float:
    """Seconds in `text` (`90s`, `30m`, `2h`, `1h30m`; a bare number counts in `unit`)."""
    value = text.strip().lower()
    if _NUMBER.fullmatch(value):
        return float(value) * UNIT_SECONDS[unit]
    if not _DURATION.fullmatch(value):
        raise ValueError(f"{text!r} is not a duration: write 90s, 30m, 2h or 1h30m "
                         f"(a bare number counts in {UNIT_WORDS[unit]})")
    return sum(float(n) * UNIT_SECONDS[u] for n, u in _PART.findall(value))


def _duration_parser(unit: str, minimum: float) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, int | float):  # the default, already in seconds
            return float(value)
        try:
            seconds = parse_duration(str(value), unit)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        if seconds < minimum:
            raise typer.BadParameter(f"{value!r} is shorter than the least this takes, "
                                     f"{duration_text(minimum)}")
        return seconds

    return parse


def duration_option(*decls: str, unit: str, default: float | None, help: str,  # noqa: A002
                    minimum: float = 0.0) -> Any:
    """A typer Option for a duration; the command receives seconds (a float, or None).

    `unit` ("s", "m" or "h") is what a bare number means, as the option always
    documented it; `default` is in seconds and shown as a duration.
    """
    shown: bool | str = duration_text(default) if default is not None else False
    return typer.Option(*decls, parser=_duration_parser(unit, minimum), metavar="DURATION",
                        show_default=shown, help=f"{help} (90s, 30m, 2h; a bare number: {UNIT_WORDS[unit]})")


app = typer.Typer(
    cls=UpiGroup,
    name="upi",
    help="OpenShift 4 bare-metal UPI from one inventory file.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
)


def _version(value: bool) -> None:
    if value:
        from upi import __version__

        console.say(f"upi {__version__}")
        raise typer.Exit(0)


def _log_level(value: str) -> str:
    name = value.strip().lower()
    name = "warn" if name == "warning" else name
    if name not in console.LEVELS:
        raise typer.BadParameter(f"{value!r} is not a log level: use one of {', '.join(console.LEVELS)}")
    return name


LOG_LEVEL_HELP = ("What to show on stderr: debug adds every program run and file written, warn hides "
                  "progress, error hides warnings too.")
VERBOSE_HELP = "Same as --log-level debug."


def _command_level(ctx: typer.Context, param: typer.CallbackParam, value: Any) -> None:
    """A command's own --log-level / -v, set as it is parsed: it overrides the root's."""
    if ctx.resilient_parsing or not value:  # not given: the root's level (or UPI_LOG_LEVEL) stands
        return
    console.set_level("debug" if param.name == "verbose" else _log_level(str(value)))


@functools.cache
def _level_options() -> tuple[Any, ...]:
    """The root's --log-level and -v as options any command can carry.

    Typer has no options shared by every command, so they are declared once
    on a command of their own and its click parameters handed to each
    command; their callback sets the level as they are parsed.
    """
    declared = typer.Typer(add_completion=False)

    @declared.command()
    def levels(
        log_level: Annotated[str | None, typer.Option(
            "--log-level", metavar="debug|info|warn|error", callback=_command_level, expose_value=False,
            show_default="as given before the command, else info", help=LOG_LEVEL_HELP)] = None,
        verbose: Annotated[bool, typer.Option(
            "-v", "--verbose", callback=_command_level, expose_value=False, show_default=False,
            help=VERBOSE_HELP)] = False,
    ) -> None:
        """Never run: it only declares the options."""

    return tuple(typer.main.get_command(declared).params)


@app.callback(
    epilog="\b\nQuick start:\n  upi validate inventories/dgxpod.yaml\n"
    "  upi render inventories/dgxpod.yaml -o out/dgxpod\n"
    "  upi -v render inventories/dgxpod.yaml -o out/dgxpod --dry-run   # with debug lines\n"
    "Shell completion: upi --install-completion (or --show-completion bash > FILE).\n"
    "Reference: docs/cli.md; the inventory: docs/inventory.md"
)
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
    log_level: Annotated[str, typer.Option(
        "--log-level", metavar="debug|info|warn|error", parser=_log_level, envvar="UPI_LOG_LEVEL",
        help=LOG_LEVEL_HELP)] = console.DEFAULT_LEVEL,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help=VERBOSE_HELP, show_default=False)] = False,
) -> None:
    """OpenShift 4 bare-metal UPI from one inventory file.

    Renders install-config, DNS, DHCP/PXE, HAProxy and VM definitions, checks
    them, boots the control-plane VMs, approves node CSRs safely and drives
    the installer to the end.
    """
    console.set_level("debug" if verbose else log_level)


InventoryArg = Annotated[
    Path, typer.Argument(metavar="INVENTORY", help="The inventory YAML file.", show_default=False)
]
JsonOpt = Annotated[bool, typer.Option(
    "--json", help="Print JSON for scripts (an error too: a JSON object on stdout).",
    show_default=False)]
