"""The renderer on hand-made data: no warehouse, no files."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import math
import re

from report.data import BrandSection, EngineGrid, PageTrend, ReportData, ShareSeries
from report.render import SHARE_OF_VOICE_GID, build_figure, render_html, render_png

START = dt.date(2026, 10, 1)


def section(pages: tuple[PageTrend, ...]) -> BrandSection:
    days = tuple(START + dt.timedelta(days=i) for i in range(4))
    return BrandSection(
        brand_id="b1",
        name="Acme <Tools>",
        domain="acme.example",
        share_of_voice=(
            ShareSeries("Acme <Tools>", True, days, (40.0, 42.0, 41.0, 45.0)),
            ShareSeries("Rival", False, days, (60.0, 58.0, 59.0, 55.0)),
        ),
        visibility=EngineGrid(("Acme <Tools>", "Rival"), ("chatgpt", "claude"), ((30.0, None), (50.0, 20.0))),
        top_pages=pages,
    )


def test_the_change_of_a_page_compares_the_later_half_with_the_earlier() -> None:
    assert PageTrend("u", None, citations=30, earlier=10, later=15).change_pct == 50.0
    assert PageTrend("u", None, citations=8, earlier=0, later=8).change_pct is None


def test_a_window_without_brands_renders_a_page_that_says_so() -> None:
    data = ReportData(start=START, end=START + dt.timedelta(days=28), sections=())
    fig = build_figure(data)
    texts = [t.get_text() for sub in fig.subfigs for t in sub.texts]
    assert "No brand has data in this window." in texts
    assert render_png(data).startswith(b"\x89PNG")


def test_a_brand_without_pages_still_gets_its_other_charts() -> None:
    data = ReportData(start=START, end=START + dt.timedelta(days=4), sections=(section(()),))
    axes = build_figure(data).get_axes()
    share = next(ax for ax in axes if ax.get_gid() == SHARE_OF_VOICE_GID + "b1")
    assert [line.get_label() for line in share.get_lines()] == ["Acme <Tools>", "Rival"]
    assert any(t.get_text() == "no data in this window" for ax in axes for t in ax.texts)


def test_the_html_page_embeds_the_png_escapes_names_and_links_the_pages() -> None:
    pages = (PageTrend("https://acme.example/a?x=1&y=2", "Acme <Tools>", 12, 4, 8),)
    data = ReportData(start=START, end=START + dt.timedelta(days=4), sections=(section(pages),))
    page = render_html(data, b"\x89PNG fake")
    embedded = re.search(r'src="data:image/png;base64,([^"]+)"', page)
    assert embedded and base64.b64decode(embedded.group(1)) == b"\x89PNG fake"
    assert "Acme &lt;Tools&gt;" in page and "Acme <Tools>" not in page
    assert '<a href="https://acme.example/a?x=1&amp;y=2">' in page
    assert "▲ 100%" in page
    assert not re.search(r'(src|href)="(?!data:|https://acme)', page)  # nothing fetched from elsewhere


def test_a_day_the_brand_was_not_measured_breaks_its_lines_and_is_marked() -> None:
    measured = (START, START + dt.timedelta(days=1), START + dt.timedelta(days=3))
    gap = dataclasses.replace(
        section(()),
        share_of_voice=(ShareSeries("Acme <Tools>", True, measured, (40.0, 42.0, 45.0)),),
        measured_days=measured,
    )
    data = ReportData(start=START, end=START + dt.timedelta(days=4), sections=(gap,))
    share = next(ax for ax in build_figure(data).get_axes() if ax.get_gid() == SHARE_OF_VOICE_GID + "b1")
    [line] = share.get_lines()
    assert [math.isnan(v) for v in line.get_ydata()] == [False, False, True, False]  # no line across it
    assert [t.get_text() for t in share.get_legend().get_texts()] == ["Acme <Tools>", "not measured (1 day)"]
    assert len(share.patches) == 1  # the day is shaded


def test_the_html_page_has_one_title_the_images() -> None:
    data = ReportData(start=START, end=START + dt.timedelta(days=4), sections=(section(()),))
    page = render_html(data, b"\x89PNG fake")
    body = page.split("<body>", 1)[1]
    assert "<h1" not in body and body.count("AI search visibility report") == 1  # the image's alt text


def test_only_http_and_https_pages_become_links_anything_else_is_text() -> None:
    urls = [
        "javascript:alert(document.cookie)",
        "JavaScript:alert(1)",
        " javascript:alert(1)",
        "java\tscript:alert(1)",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "//evil.example/x",
        "https:no-host",
        "https://acme.example/ok",
        "HTTP://acme.example/caps",
    ]
    pages = tuple(PageTrend(url, None, 5, 2, 3) for url in urls)
    page = render_html(
        ReportData(start=START, end=START + dt.timedelta(days=4), sections=(section(pages),)), b"png"
    )
    links = re.findall(r'<a href="([^"]*)"', page)
    assert links == ["https://acme.example/ok", "HTTP://acme.example/caps"]
    assert "javascript:alert(document.cookie)" in page  # still shown, as text
    assert "&lt;script&gt;" in page and "<script>" not in page


def test_a_page_with_blanks_or_control_characters_is_text_not_a_link() -> None:
    """Browsers drop such characters from a link (``urlsplit`` does too): what is shown would not be
    what a click opens."""
    urls = [" https://acme.example/padded", "https://acme.example/trailing ", "https://acme.ex\tample/tab"]
    pages = tuple(PageTrend(url, None, 5, 2, 3) for url in [*urls, "https://acme.example/ok"])
    page = render_html(
        ReportData(start=START, end=START + dt.timedelta(days=4), sections=(section(pages),)), b"png"
    )
    assert re.findall(r'<a href="([^"]*)"', page) == ["https://acme.example/ok"]


def drawn_texts(data: ReportData) -> list:
    """Every visible, non-empty text of the drawn report, with its box in pixels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    fig = build_figure(data)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [(t, t.get_window_extent(renderer)) for t in texts]


def busy_report() -> ReportData:
    """Two brands, each with five long URLs, so every label the report has is drawn at its widest."""
    pages = tuple(
        PageTrend(f"https://docs.{n}-long-subdomain.example/a/long/path/page-{n}", "Rival", 900 - n, 5, 9)
        for n in range(5)
    )
    return ReportData(
        start=START, end=START + dt.timedelta(days=4), sections=(section(pages), section(pages[:3]))
    )


def test_no_text_of_the_report_overprints_another() -> None:
    drawn = drawn_texts(busy_report())
    titles = {t.get_text() for t, _ in drawn}
    assert "Top cited pages, all engines" in titles
    assert any(text.startswith("change: last") for text in titles)
    overlaps = [
        (a.get_text(), b.get_text())
        for i, (a, box_a) in enumerate(drawn)
        for b, box_b in drawn[i + 1 :]
        if box_a.overlaps(box_b)
    ]
    assert overlaps == []


def test_every_text_is_readable_with_the_report_1200_px_wide() -> None:
    data = busy_report()
    scale = 1200 / build_figure(data).bbox.width  # the HTML page shows the image at the window's width
    smallest = min(t.get_fontsize() * t.figure.dpi / 72 * scale for t, _ in drawn_texts(data))
    assert smallest >= 9, f"the smallest text is {smallest:.1f} px tall at 1200 px"
