"""``python -m sandbox [--host H] [--port P] [--seed N] [--faults PROFILE] [--size demo|large]``."""

from __future__ import annotations

import argparse
import datetime as dt

from sandbox.config import SandboxConfig
from sandbox.faults import PROFILES, FaultsConfig
from sandbox.server import PortUnavailableError, serve_forever


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox", description="Serve the local visibility sandbox."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--faults", choices=PROFILES, default="none")
    parser.add_argument("--size", choices=("demo", "large"), default="demo")
    parser.add_argument("--today", type=dt.date.fromisoformat, default=None, help="first day without data")
    args = parser.parse_args(argv)
    config = SandboxConfig(
        seed=args.seed, size=args.size, faults=FaultsConfig(profile=args.faults, seed=args.seed)
    )
    if args.today is not None:
        config.today = args.today
    try:
        serve_forever(config, host=args.host, port=args.port)
    except PortUnavailableError as exc:  # before anything was printed: one line, usage error
        parser.exit(2, f"{parser.prog}: {exc}\n")


if __name__ == "__main__":
    main()
