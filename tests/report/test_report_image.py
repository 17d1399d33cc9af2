"""The report drawn from a real sync: the image's size, that it is not blank, one series per entity."""

from __future__ import annotations

import datetime as dt
import io
import math

import numpy as np
import pytest
from matplotlib.image import imread

from report.data import ReportData, load_report_data
from report.render import SHARE_OF_VOICE_GID, build_figure, render_png
from tests.report.conftest import FIRST_DAY, LAST_DAY, Synced


@pytest.fixture(scope="module")
def data(synced: Synced) -> ReportData:
    with synced.warehouse.get_warehouse() as wh:
        return load_report_data(wh)


def test_the_window_is_the_landed_days_up_to_the_newest_not_today(synced: Synced, data: ReportData) -> None:
    assert data.last_day == LAST_DAY  # the sandbox's "today" is in the past
    assert data.start == FIRST_DAY  # 28 days asked, fewer landed
    with synced.warehouse.get_warehouse() as wh:
        assert load_report_data(wh, days=2).start == LAST_DAY - dt.timedelta(days=1)


def test_the_png_is_full_size_and_not_blank(data: ReportData) -> None:
    png = render_png(data)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pixels = imread(io.BytesIO(png))
    assert pixels.shape[:2] == (round((1.5 + 5.0 * len(data.sections)) * 100), 2000)
    rgb = (pixels[..., :3] * 255).round().astype(np.uint32).reshape(-1, 3)
    packed = rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]
    assert len(np.unique(packed)) > 500  # lines, bars, a colour grid, anti-aliased text
    non_white = np.any(rgb < 245, axis=1).mean()
    assert 0.10 < non_white < 0.9


def test_each_brand_has_one_share_of_voice_line_per_brand_and_tracked_competitor(
    synced: Synced, data: ReportData
) -> None:
    brands = dict(synced.query("SELECT id, name FROM brands WHERE is_current"))
    assert {s.brand_id for s in data.sections} == set(brands)
    fig = build_figure(data)
    share_axes = {
        ax.get_gid().removeprefix(SHARE_OF_VOICE_GID): ax
        for ax in fig.get_axes()
        if (ax.get_gid() or "").startswith(SHARE_OF_VOICE_GID)
    }
    assert set(share_axes) == set(brands)
    for brand_id, ax in share_axes.items():
        competitors = {
            name
            for (name,) in synced.query(
                f"SELECT brand_name FROM tracked_competitors WHERE is_current AND brand_id = '{brand_id}'"
            )
        }
        in_trends = {
            name
            for (name,) in synced.query(
                "SELECT DISTINCT brand_name FROM competitor_trends "
                f"WHERE engine = 'all' AND brand_id = '{brand_id}'"
            )
        }
        expected = {brands[brand_id], *competitors}
        assert in_trends == expected
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert set(lines) == expected
        # every line (the brand's own and each competitor's) carries its landed values, day by day;
        # a day the brand was not measured breaks the lines (no value) and is named in the legend
        own = lines[brands[brand_id]]
        for name, line in lines.items():
            landed = synced.query(
                "SELECT date, share_of_voice FROM competitor_trends WHERE engine = 'all' "
                f"AND granularity = 'day' AND brand_id = '{brand_id}' "
                f"AND brand_name = '{name.replace(chr(39), chr(39) * 2)}' ORDER BY date"
            )
            assert landed and landed[0][0] >= FIRST_DAY
            drawn = [
                (d, v) for d, v in zip(line.get_xdata(), line.get_ydata(), strict=True) if not math.isnan(v)
            ]
            assert [d for d, _ in drawn] == [d for d, _ in landed], name
            assert [v for _, v in drawn] == pytest.approx([v for _, v in landed]), name
        section = next(s for s in data.sections if s.brand_id == brand_id)
        window = (data.end - data.start).days
        missing = window - len(section.measured_days)
        assert len(own.get_xdata()) == window
        not_measured = [f"not measured ({missing} day{'s' if missing > 1 else ''})"] if missing else []
        assert [t.get_text() for t in ax.get_legend().get_texts()] == [
            line.get_label() for line in ax.get_lines()
        ] + not_measured
        assert own.get_linewidth() > max(line.get_linewidth() for line in lines.values() if line is not own)


def test_top_pages_are_the_most_cited_of_the_window_with_both_halves(
    synced: Synced, data: ReportData
) -> None:
    for section in data.sections:
        # like with like: the earlier and the later half of the days the brand was measured on
        measured = [
            d
            for (d,) in synced.query(
                "SELECT DISTINCT date FROM competitor_trends WHERE engine = 'all' AND granularity = 'day' "
                f"AND brand_id = '{section.brand_id}' AND date >= DATE '{data.start}' ORDER BY date"
            )
        ]
        assert tuple(measured) == section.measured_days
        half = len(measured) // 2
        earlier = ", ".join(f"DATE '{d}'" for d in measured[:half])
        later = ", ".join(f"DATE '{d}'" for d in measured[len(measured) - half :])
        expected = synced.query(
            "SELECT url, SUM(citation_count) AS n, "
            f"SUM(CASE WHEN date IN ({earlier}) THEN citation_count ELSE 0 END) AS earlier, "
            f"SUM(CASE WHEN date IN ({later}) THEN citation_count ELSE 0 END) AS later "
            f"FROM cited_pages WHERE engine = 'all' AND brand_id = '{section.brand_id}' "
            "GROUP BY url ORDER BY n DESC, url LIMIT 5"
        )
        assert len(expected) == 5
        assert [(p.url, p.citations, p.earlier, p.later) for p in section.top_pages] == expected
        assert all(p.change_pct is not None for p in section.top_pages if p.earlier)
        # a page on the site of the brand or of a tracked competitor is attributed to it
        entities = {s.entity for s in section.share_of_voice}
        for page in section.top_pages:
            assert page.owner is None or page.owner in entities
    assert any(page.owner for section in data.sections for page in section.top_pages)
