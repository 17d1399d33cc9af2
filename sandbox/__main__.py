"""``python -m sandbox [--host H] [--port P] [--seed N] [--faults PROFILE] [--size demo|large] [--today D]``;
``visibility-sync sandbox`` takes the same options (:func:`add_arguments`)."""

from __future__ import annotations

import argparse
import datetime as dt

from sandbox.config import SandboxConfig
from sandbox.faults import PROFILES, FaultsConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which sandbox to serve, and where."""
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faults", choices=PROFILES, default="none", help="fault profile")
    parser.add_argument("--size", choices=("demo", "large"), default="demo", help="world size")
    parser.add_argument("--today", type=dt.date.fromisoformat, default=None, help="first day without data")


def config_of(args: argparse.Namespace) -> SandboxConfig:
    """The sandbox the options of :func:`add_arguments` describe."""
    config = SandboxConfig(
        seed=args.seed, size=args.size, faults=FaultsConfig(profile=args.faults, seed=args.seed)
    )
    if args.today is not None:
        config.today = args.today
    return config


def main(argv: list[str] | None = None) -> None:
    from sandbox.server import PortUnavailableError, serve_forever

    parser = argparse.ArgumentParser(
        prog="python -m sandbox", description="Serve the local visibility sandbox."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        serve_forever(config_of(args), host=args.host, port=args.port)
    except PortUnavailableError as exc:  # before anything was printed: one line, usage error
        parser.exit(2, f"{parser.prog}: {exc}\n")


if __name__ == "__main__":
    main()
