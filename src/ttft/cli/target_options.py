"""The options that name a live service, shared by every command that measures one.

``@target_options`` adds ``--url``, ``--model``, ``--api-key``, ``--metrics-url``, ``--engine`` and
``--header`` with one spelling and one help text, and hands the command a typed
``TargetOptions`` instead of six loose keyword arguments. ``@access_options`` is the part that
says who we are (``--api-key``, ``--header``), for a command whose services are named another
way (``verify quality``'s ``--baseline``/``--candidate``): a service behind a key is reached the
same way by every command.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from ttft.cli.engine_choice import EngineKind
from ttft.core.target_options import AccessOptions, TargetOptions

F = TypeVar("F", bound=Callable[..., Any])


_API_KEY = click.option(
    "--api-key", envvar="TTFT_API_KEY", default=None, help="Bearer key (or $TTFT_API_KEY)."
)
_HEADER = click.option(
    "--header", "headers", multiple=True, help="Extra request header 'Name: value'."
)

_OPTIONS = (
    click.option(
        "--url",
        default=None,
        help="Service base URL (http://host:port). Default: start the embedded engine.",
    ),
    click.option("--model", default=None, help="Model name. Default: the first of GET /v1/models."),
    _API_KEY,
    click.option("--metrics-url", default=None, help="Prometheus endpoint. Default: URL/metrics."),
    click.option(
        "--engine",
        "engine_kind",
        type=EngineKind(),
        default=None,
        help="Engine kind (metric names, advice). Default: guessed from /metrics.",
    ),
    _HEADER,
)


def target_options(command: F) -> F:
    """Add the target options to a click command; it receives them as ``target=TargetOptions``."""

    @functools.wraps(command)
    def with_target(*args: Any, **kwargs: Any) -> Any:
        target = TargetOptions(
            url=kwargs.pop("url"),
            model=kwargs.pop("model"),
            api_key=kwargs.pop("api_key"),
            metrics_url=kwargs.pop("metrics_url"),
            engine_kind=kwargs.pop("engine_kind"),
            headers=tuple(kwargs.pop("headers")),
        )
        return command(*args, target=target, **kwargs)

    decorated: Any = with_target
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


def access_options(command: F) -> F:
    """Add ``--api-key`` and ``--header``; the command receives them as ``access=AccessOptions``."""

    @functools.wraps(command)
    def with_access(*args: Any, **kwargs: Any) -> Any:
        access = AccessOptions(api_key=kwargs.pop("api_key"), headers=tuple(kwargs.pop("headers")))
        return command(*args, access=access, **kwargs)

    decorated: Any = _HEADER(_API_KEY(with_access))
    return decorated  # type: ignore[no-any-return]
