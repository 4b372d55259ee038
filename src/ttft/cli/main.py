"""The ``ttft`` command: a group whose subcommands load only when called.

Each command lives in its own module under ``ttft.cli``; this file only lists them, so
``ttft --help`` stays fast and one broken optional import cannot take the others down.
"""

from __future__ import annotations

import importlib
import sys

import click

from ttft import __version__
from ttft.core.errors import TtftError

# name -> (module:attribute, one-line purpose shown by `ttft --help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": (
        "ttft.cli.doctor:doctor",
        "Find where first-token time goes on a live service; fixes ranked cheapest first.",
    ),
    "bench": (
        "ttft.cli.bench:bench",
        "Measure streaming TTFT at the client per prompt length x load; compare runs.",
    ),
    "lint": (
        "ttft.cli.lint:lint",
        "Static checks that catch TTFT killers: nginx configs, engine flags, prompts.",
    ),
    "gateway": (
        "ttft.cli.gateway:gateway",
        "An OpenAI-compatible front door: unbuffered streams, pre-rendered templates, lanes, "
        "affinity.",
    ),
    "report": (
        "ttft.cli.report:report",
        "Render a saved run (bench, doctor, tune) as one self-contained HTML page with charts.",
    ),
    "serve": (
        "ttft.cli.serve:serve",
        "Run the embedded llama-server (Gemma 3 270M) in the foreground.",
    ),
    "simulate": (
        "ttft.cli.simulate:simulate",
        "What-if answers (replicas, routing, slots, rate) from a model calibrated on your engine.",
    ),
    "tune": (
        "ttft.cli.tune:tune",
        "Sweep engine settings under SLOs and attribute A/B chains; resumable experiments.",
    ),
    "verify": (
        "ttft.cli.verify:verify",
        "Quality verdicts per context length before a speed lever (KV quantization) ships.",
    ),
    "weights": (
        "ttft.cli.weights:weights",
        "Verify weight files (safetensors, GGUF) and checksum manifests without loading them.",
    ),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that command runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module_name, attr = entry[0].split(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ttft")
def cli() -> None:
    """Find where time-to-first-token goes, and remove the part outside the weights.

    With no --url, commands run against the embedded engine (llama.cpp + Gemma 3 270M).

    \b
    Start here:
      ttft doctor                        # examine the embedded engine
      ttft doctor --url http://HOST:PORT # examine your service; fixes ranked cheapest first
    """


def main() -> None:
    """Entry point: user errors become one clear message and exit code 2, never a traceback."""
    try:
        # Without standalone mode click returns a command's exit code instead of exiting.
        code = cli.main(standalone_mode=False)
        if isinstance(code, int) and code != 0:
            sys.exit(code)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except TtftError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)
