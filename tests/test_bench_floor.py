"""The floor benchmark's timeline: seconds grouped into phases, each named by what bound it."""

from __future__ import annotations

from bench.bench_floor import Second, Timeline, phases

RATE = 200.0


def _second(at: float, requests: dict[str, int], command: float, busy: float) -> Second:
    return Second(at, requests, command, 0.0, 0.3, busy)


def _rows(lines: list[str]) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def test_seconds_are_grouped_by_the_endpoint_most_asked_and_a_lone_second_joins_its_phase() -> None:
    timeline = Timeline(
        [
            _second(1, {"urls": 100, "trends": 5}, 1.05, 0.7),
            _second(2, {"urls": 110}, 1.1, 0.7),
            _second(3, {"trends": 50}, 1.0, 0.7),  # alone: part of the urls phase
            _second(4, {"urls": 90}, 1.0, 0.7),
            _second(5, {"mentions": 198}, 1.0, 0.8),
            _second(6, {"mentions": 202}, 1.1, 0.8),
        ]
    )

    rows = _rows(phases(timeline, RATE))

    assert [(r[0], r[1], r[2]) for r in rows] == [("urls", "1", "4"), ("mentions", "5", "2")]
    assert rows[0][3] == f"{(105 + 110 + 50 + 90) / 4:.0f}"


def test_each_phase_is_named_by_what_bound_it() -> None:
    timeline = Timeline(
        [
            _second(1, {"answers": 210}, 1.0, 0.7),  # at the rate
            _second(2, {"answers": 190}, 1.0, 0.7),
            _second(3, {"urls": 120}, 1.1, 0.7),  # below it, one core, a core to spare
            _second(4, {"urls": 120}, 1.1, 0.7),
            _second(5, {"mentions": 120}, 1.1, 0.97),  # below it, the machine saturated
            _second(6, {"mentions": 120}, 1.1, 0.95),
            _second(7, {"trends": 20}, 0.3, 0.2),  # below it, nothing busy: waits, start-up
            _second(8, {"trends": 20}, 0.3, 0.2),
            _second(9, {}, 1.0, 0.5),  # no request: the last table lands
            _second(10, {}, 1.0, 0.5),
        ]
    )

    bound = [r[-1] for r in _rows(phases(timeline, RATE))]

    assert bound == [
        "the rate limit",
        "the command's one interpreter",
        "the machine's CPU",
        "other (start-up, landing, waits)",
        "no request: start-up, or the last landing",
    ]
