"""The `tracesynth` command line: thin wrappers that parse arguments and call the package.

Each command group lives in its own module (one job each); they all register on `app`.
Errors that TraceSynth raises on purpose print as one line on stderr with a non-zero exit.
"""

from __future__ import annotations

import importlib
import sys

import typer
from typer.exceptions import TyperException

from tracesynth.cli.app import app, console_err

#: Command modules, in the order their commands appear in --help (pipeline order).
COMMAND_MODULES = [
    "tracesynth.cli.io",
    "tracesynth.cli.record",
    "tracesynth.cli.model",
    "tracesynth.cli.constraints",
    "tracesynth.cli.evaluate",
    "tracesynth.cli.experiment",
]


def _register() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    from rich.markup import escape

    from tracesynth.errors import TraceSynthError

    _register()
    try:
        # Without standalone mode, Typer returns a command's exit code (typer.Exit(n), an
        # interrupted parse) instead of exiting; pass it on.
        rv = app(args=argv, prog_name="tracesynth", standalone_mode=False)
        if isinstance(rv, int) and not isinstance(rv, bool):
            return rv
    except TraceSynthError as exc:
        # escaped: a message quoting a path or a name with [brackets] in it is text, not markup
        console_err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return exc.exit_code
    except KeyboardInterrupt:
        console_err.print("[bold red]interrupted[/]")
        return 130
    except SystemExit as exc:  # typer/click exits (e.g. --help) and commands returning a code
        return int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except typer.Abort:
        console_err.print("[bold red]aborted[/]")
        return 130
    except TyperException as exc:  # usage errors: bad option, missing argument, ...
        show = getattr(exc, "show", None)
        if show:
            show()
        else:
            console_err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return getattr(exc, "exit_code", 2)
    return 0


if __name__ == "__main__":  # python -m tracesynth.cli
    sys.exit(main())
