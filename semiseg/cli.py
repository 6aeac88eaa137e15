"""The `semiseg` command line: one thin function per command, no logic here."""

from __future__ import annotations

import sys

import typer

from . import __version__
from .errors import SemisegError

app = typer.Typer(
    name="semiseg",
    help="Genome segmentation with a neural encoder and an exact semi-Markov CRF.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"semiseg {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _state["debug"] = debug


def main() -> None:
    """Console-script entry point: user errors become one line and exit code 2."""
    try:
        app(standalone_mode=False)
    except SemisegError as err:
        if _state["debug"]:
            raise
        typer.echo(f"semiseg: error: {err}", err=True)
        sys.exit(err.exit_code)
    except typer.Exit as ex:
        sys.exit(ex.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        typer.echo("semiseg: interrupted", err=True)
        sys.exit(130)
    except Exception as err:  # click usage errors and the like
        import click

        if isinstance(err, click.exceptions.ClickException):
            err.show()
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
