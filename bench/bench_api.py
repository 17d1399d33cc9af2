"""Benchmark of the API client against the local sandbox (a script, not a test).

Claims checked, each measured in the same run:

1. With the sandbox's rate limit at R requests/s and an added latency of L per request, fetching N
   independent pages with concurrency c takes at most 1.15 x max(N/R, N*L/c).
2. Under the ``hostile`` fault profile no fetch fails, and after the first rate window fewer than
   2% of the requests are answered 429 by the sandbox's rate limiter.

Run: ``.venv/bin/python bench/bench_api.py [--quick]``. Writes the figures to ``bench/RESULTS.md``
under ``## API client`` (other sections of that file are left as they are).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import processes as P
from bench.processes import SANDBOX_TODAY, SandboxService, sandbox_service, served, throttled
from resources.api.client import VisibilityClient

SECTION = "## API client"
TOLERANCE = 1.15
MAX_429_SHARE = 0.02
PAGE_ROWS = 20
TODAY = SANDBOX_TODAY


@dataclasses.dataclass
class Scenario:
    name: str
    rate: float  # R, requests per second (token bucket refill; burst = R)
    latency_s: float  # L, added to every request by the sandbox
    concurrency: int  # c, the client's max_concurrency
    pages: int  # N
    profile: str = "none"
    fault_overrides: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Outcome:
    scenario: Scenario
    elapsed_s: float
    bound_s: float
    failed: int
    sandbox_requests: int
    sandbox_429: int
    sandbox_429_after_first_window: int
    sandbox_requests_after_first_window: int
    client: dict[str, Any]

    @property
    def ratio(self) -> float:
        return self.elapsed_s / self.bound_s

    @property
    def share_429_after_first_window(self) -> float:
        total = self.sandbox_requests_after_first_window
        return self.sandbox_429_after_first_window / total if total else 0.0


def run(handle: SandboxService, scenario: Scenario, prompt_ids: list[str]) -> Outcome:
    handle.configure(
        limits={
            "rate_per_second": scenario.rate,
            "burst": max(1, int(scenario.rate)),
            "max_concurrent": max(64, scenario.concurrency * 4),
            "endpoint_limit": 100_000,
            "quota": None,
        },
        faults={
            "profile": scenario.profile,
            "seed": 11,
            "latency_ms": scenario.latency_s * 1000.0,
            "overrides": scenario.fault_overrides,
        },
    )
    time.sleep(1.0)  # let the bucket fill: every scenario starts from a full burst
    start, end = TODAY - dt.timedelta(days=1), TODAY
    failures: list[BaseException] = []
    first_window: dict[str, dict[str, int]] = {}

    def snapshot_after_first_window() -> None:
        time.sleep(1.0)  # the bucket refills in 1 s (burst = R): that is the first window
        first_window.update(handle.stats())

    with VisibilityClient(
        handle.url,
        handle.keys["workspace"],
        max_concurrency=scenario.concurrency,
        retry_deadline_seconds=120.0,
        backoff_base_seconds=0.1,
    ) as client:

        def fetch_one_page(prompt_id: str) -> int:
            try:
                rows = client.list_prompt_mentions(prompt_id, start=start, end=end, limit=PAGE_ROWS)
                return len(list(itertools.islice(rows, PAGE_ROWS)))  # exactly one request
            except Exception as exc:  # counted, not raised: the claim is "no fetch fails"
                failures.append(exc)
                return 0

        handle.reset_stats()
        snapper = threading.Thread(target=snapshot_after_first_window, daemon=True)
        began = time.monotonic()
        snapper.start()
        work = itertools.islice(itertools.cycle(prompt_ids), scenario.pages)
        list(client.map_concurrent(fetch_one_page, work))
        elapsed = time.monotonic() - began
        snapper.join()
        client_stats = client.stats.to_metadata()
    stats = handle.stats()
    total, total_429 = served(stats), throttled(stats)
    bound = max(scenario.pages / scenario.rate, scenario.pages * scenario.latency_s / scenario.concurrency)
    return Outcome(
        scenario=scenario,
        elapsed_s=elapsed,
        bound_s=bound,
        failed=len(failures),
        sandbox_requests=total,
        sandbox_429=total_429,
        sandbox_429_after_first_window=total_429 - throttled(first_window),
        sandbox_requests_after_first_window=total - served(first_window),
        client=client_stats,
    )


def baseline_ms(handle: SandboxService, prompt_ids: list[str], n: int = 40) -> float:
    """One page at a time with no added latency: the sandbox's own time per request (not in the bound)."""
    handle.configure(
        limits={"rate_per_second": 100_000.0, "burst": 100_000, "max_concurrent": 1_000, "quota": None},
        faults={"profile": "none", "latency_ms": 0.0, "overrides": {}},
    )
    start, end = TODAY - dt.timedelta(days=1), TODAY
    with VisibilityClient(handle.url, handle.keys["workspace"], max_concurrency=1) as client:

        def one_page(prompt_id: str) -> None:
            rows = client.list_prompt_mentions(prompt_id, start=start, end=end, limit=PAGE_ROWS)
            list(itertools.islice(rows, PAGE_ROWS))

        for prompt_id in prompt_ids[:3]:  # warm the sandbox's blocks and the connection
            one_page(prompt_id)
        began = time.monotonic()
        for prompt_id in itertools.islice(itertools.cycle(prompt_ids), n):
            one_page(prompt_id)
        return (time.monotonic() - began) / n * 1000.0


def _prompt_ids(handle: SandboxService) -> list[str]:
    with VisibilityClient(handle.url, handle.keys["workspace"]) as client:
        brand = next(iter(client.list_brands()))
        return [row["id"] for row in client.list_prompts(brand["id"])]


SCENARIOS = [  # name, R, L, c, N, fault profile, its overrides
    Scenario("rate-bound", 25, 0.02, 8, 250),
    Scenario("latency-bound", 1000, 0.25, 8, 320),
    Scenario("balanced", 20, 0.4, 8, 200),
    # The limiter's 429s alone: hostile without its injected 429s (throttle, quota).
    Scenario("hostile, limiter only", 25, 0.02, 8, 250, "hostile", {"throttle": 0.0, "quota": 0.0}),
    # The full hostile profile, minus quota_exceeded (which must stop a sync, by design).
    Scenario("hostile", 25, 0.02, 8, 250, "hostile", {"quota": 0.0}),
]


def _row(o: Outcome) -> str:
    s = o.scenario
    retries = sum(o.client["retries_by_cause"].values())
    return (
        f"| {s.name} | {s.profile} | {s.rate:g} | {s.latency_s * 1000:g} ms | {s.concurrency} | {s.pages} "
        f"| {o.bound_s:.2f} s | {o.elapsed_s:.2f} s | **{o.ratio:.3f}** | {o.failed} "
        f"| {o.sandbox_requests} | {o.sandbox_429} | {o.share_429_after_first_window:.2%} | {retries} |"
    )


def render(outcomes: list[Outcome], quick: bool, base_ms: float) -> str:
    lines = [
        SECTION,
        "",
        f"`bench/bench_api.py`{' --quick' if quick else ''}, {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, "
        f"Python {platform.python_version()} on {platform.machine()}, sandbox "
        "(uvicorn on loopback, own process).",
        "",
        "Each run fetches N independent pages (one `GET /v1/prompts/{id}/mentions` page of one day each) "
        "through `map_concurrent`, against the sandbox in its own process (`python -m sandbox`), "
        "configured through `POST /_sandbox/config`. The sandbox's token bucket refills at R/s with a "
        "burst of R; L is added to every request. Bound = max(N/R, N*L/c); the claim is elapsed <= "
        "1.15 x bound. The 429 share counts the sandbox's own stats after the first 1 s window. The "
        "bound leaves out the sandbox's own time per request, measured in the same run at "
        f"{base_ms:.1f} ms (one page at a time, no added latency; the machine is shared, so this "
        "figure moves with its load). Elapsed includes the client's start: its first request goes "
        "alone, to learn the limits before any burst (one round trip, 2.5% of the latency-bound run). "
        "A rate-bound run can finish under N/R because the bucket starts full: its first R requests "
        "need no refill.",
        "",
        "| scenario | profile | R (req/s) | L | c | N | bound | elapsed | ratio | failed | requests | 429s "
        "| 429 share after 1st window | client retries |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_row(o) for o in outcomes),
        "",
    ]
    for o in outcomes:
        lines.append(
            f"- {o.scenario.name}: retries by cause {o.client['retries_by_cause'] or '{}'}; "
            f"waits {o.client['wait_seconds_by_cause'] or '{}'} (seconds summed over threads)."
        )
    lines += [
        "",
        "Notes: the full hostile profile injects `rate_limited`/`endpoint_rate_limited`/"
        "`concurrency_limited` 429s into ~10% of requests at random, whatever the client does; those "
        "are counted in its 429 column. The 2% claim is about the rate limiter, measured by the "
        "`hostile, limiter only` row (hostile without injected 429s). `quota_exceeded` is switched "
        "off in both hostile rows because it stops a sync on purpose. The full hostile row is slow by "
        "design: an injected `rate_limited` with a Retry-After of up to 2 s holds back every request of "
        "the key (one shared budget), which is what a real `rate_limited` asks for.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = P.parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer pages per scenario")
    args = parser.parse_args(argv)
    outcomes = []
    with sandbox_service(log_dir=P.work_folder("bench-api-")) as handle:
        prompt_ids = _prompt_ids(handle)
        base_ms = baseline_ms(handle, prompt_ids)
        print(f"sandbox time per request (c=1, L=0): {base_ms:.1f} ms", flush=True)
        for scenario in SCENARIOS:
            if args.quick:
                scenario = dataclasses.replace(scenario, pages=max(40, scenario.pages // 3))
            outcome = run(handle, scenario, prompt_ids)
            print(_row(outcome), flush=True)
            outcomes.append(outcome)
    P.publish(SECTION, render(outcomes, args.quick, base_ms), not args.no_write)
    ok = all(o.ratio <= TOLERANCE for o in outcomes if o.scenario.profile == "none")
    ok &= all(o.failed == 0 for o in outcomes)
    ok &= all(
        o.share_429_after_first_window < MAX_429_SHARE
        for o in outcomes
        if o.scenario.fault_overrides.get("throttle") == 0.0
    )
    print("claims hold" if ok else "A CLAIM FAILED", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
