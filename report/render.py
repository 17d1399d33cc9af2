"""Drawing the report: :class:`~report.data.ReportData` in, a matplotlib figure, PNG bytes or HTML out.

matplotlib is imported lazily (a sync never pays for it), and a bare ``Figure`` is used, never
pyplot: no global backend or figure registry shared by Dagster's threads.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import io
import math
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from report.data import BrandSection, EngineGrid, PageTrend, ReportData

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

#: 2000 px wide at the default dpi; 1.5 in of header plus 5 in per brand.
WIDTH_IN = 20.0
HEADER_IN = 1.5
ROW_IN = 5.0
#: Relative widths of a brand's three charts (constrained layout places them around their labels)
CHART_WIDTHS = (6.6, 3.4, 4.5)
#: Points between a chart's title and its axes: room for a column heading under the title
TITLE_PAD = 26
DPI = 100

TITLE = "AI search visibility report"
OWN_COLOR = "#1b4f9c"
COMPETITOR_COLORS = ("#e07b39", "#2f9e6e", "#b5446e", "#8c6bb1", "#c9a227", "#4fa3c7", "#7a7a7a", "#d4605a")
THIRD_PARTY_COLOR = "#b8c0c9"
NOT_MEASURED_COLOR = "#eceff3"
UP_COLOR, DOWN_COLOR, MUTED = "#2e7d32", "#c62828", "#5f6b76"
ENGINE_LABELS = {
    "chatgpt": "ChatGPT",
    "claude": "Claude",
    "perplexity": "Perplexity",
    "gemini": "Gemini",
    "google_ai_overviews": "AI Overviews",
    "google_ai_mode": "AI Mode",
    "copilot": "Copilot",
}
#: The share-of-voice axes of a brand carry this gid prefix plus the brand id (tests find them by it).
SHARE_OF_VOICE_GID = "share_of_voice:"
MAX_URL_CHARS = 32
DASH = "\u2013"  # en dash: "no value" and date ranges
LEGEND = (
    "Bold/blue: your brand. Page bars take the colour of the brand whose site it is (grey: third party); "
    "change: the later half of the brand's measured days vs the earlier half (days it was not measured, "
    "shaded, are left out)."
)


def build_figure(data: ReportData) -> Figure:
    """The whole report as one figure: a header, then one row of three charts per brand."""
    from matplotlib.figure import Figure

    rows = max(1, len(data.sections))
    fig = Figure(
        figsize=(WIDTH_IN, HEADER_IN + ROW_IN * rows), dpi=DPI, facecolor="white", layout="constrained"
    )
    fig.get_layout_engine().set(w_pad=0.15, h_pad=0.15, wspace=0.06)
    header, *brand_rows = fig.subfigures(
        rows + 1, 1, height_ratios=[HEADER_IN, *([ROW_IN] * rows)], hspace=0.0
    )
    _draw_header(header, data)
    if not data.sections:
        brand_rows[0].text(
            0.5, 0.5, "No brand has data in this window.", ha="center", va="center", fontsize=16, color=MUTED
        )
    for subfig, section in zip(brand_rows, data.sections, strict=False):
        _draw_brand(subfig, section, data)
    return fig


def render_png(data: ReportData, *, dpi: int = DPI) -> bytes:
    """The report as PNG bytes (``WIDTH_IN * dpi`` pixels wide)."""
    fig = build_figure(data)
    buffer = io.BytesIO()
    # no "Software"/date chunks: the same data gives the same bytes
    fig.savefig(buffer, format="png", dpi=dpi, facecolor="white", metadata={"Software": None})
    return buffer.getvalue()


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(data: ReportData, png: bytes | None = None) -> str:
    """A self-contained page: the PNG embedded, then each brand's figures as text with clickable pages."""
    png = png if png is not None else render_png(data)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(TITLE)}</title>",
        "<style>body{font-family:system-ui,sans-serif;margin:2rem;color:#1f2933;max-width:2000px}"
        "img{width:100%;height:auto;border:1px solid #e4e7eb}"
        "table{border-collapse:collapse;margin:.5rem 0 1.5rem}"
        "td,th{padding:.2rem .8rem;border-bottom:1px solid #e4e7eb;text-align:left}"
        "td.n{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#5f6b76}</style>",
        "</head><body>",
        # the image opens with the title and the window: the page does not repeat them
        f'<img alt="{html.escape(TITLE + ": " + _window_text(data))}" src="{png_data_uri(png)}">',
    ]
    for section in data.sections:
        parts.append(f"<h2>{html.escape(_brand_title(section))}</h2>")
        parts.append("<table><tr><th>brand</th><th>share of voice (window average)</th></tr>")
        for s in section.share_of_voice:
            name = f"<b>{html.escape(s.entity)}</b>" if s.is_own_brand else html.escape(s.entity)
            parts.append(f'<tr><td>{name}</td><td class="n">{s.mean:.1f}%</td></tr>')
        parts.append("</table>")
        parts.append("<table><tr><th>top cited page</th><th>whose</th><th>citations</th><th>change</th></tr>")
        for page in section.top_pages:
            parts.append(
                f"<tr><td>{_page_link(page.url)}</td><td>{html.escape(page.owner or 'third party')}</td>"
                f'<td class="n">{page.citations:,}</td>'
                f'<td class="n">{html.escape(_change_text(page))}</td></tr>'
            )
        parts.append("</table>")
    if data.brands_left_out:
        parts.append(f'<p class="muted">{data.brands_left_out} more brand(s) not shown.</p>')
    parts.append(f'<p class="muted">{html.escape(LEGEND)}</p></body></html>')
    return "\n".join(parts)


# --- parts of the figure ------------------------------------------------------------------------


def _draw_header(subfig: SubFigure, data: ReportData) -> None:
    subfig.set_facecolor("#f4f6f8")
    subfig.text(0.012, 0.70, TITLE, fontsize=26, fontweight="bold", color="#1f2933", va="center")
    subfig.text(0.012, 0.38, _window_text(data), fontsize=13, color=MUTED, va="center")
    subfig.text(0.012, 0.15, LEGEND, fontsize=11, color=MUTED, va="center")


def _draw_brand(subfig: SubFigure, section: BrandSection, data: ReportData) -> None:
    subfig.suptitle(
        _brand_title(section), x=0.012, ha="left", fontsize=17, fontweight="bold", color="#1f2933"
    )
    colors = _entity_colors(section)
    share_ax, grid_ax, pages_ax = subfig.subplots(1, 3, width_ratios=CHART_WIDTHS)
    _draw_share_of_voice(share_ax, section, colors, data)
    _draw_engine_grid(grid_ax, section.visibility)
    _draw_top_pages(pages_ax, section.top_pages, colors, _change_title(section))


def _draw_share_of_voice(ax: Axes, section: BrandSection, colors: dict[str, str], data: ReportData) -> None:
    import matplotlib.dates as mdates
    from matplotlib.ticker import PercentFormatter

    ax.set_gid(SHARE_OF_VOICE_GID + section.brand_id)
    _tidy(ax, "Share of voice, all engines (daily)")
    if not section.share_of_voice:
        _no_data(ax)
        return
    window = [data.start + dt.timedelta(days=i) for i in range((data.end - data.start).days)]
    for s in section.share_of_voice:
        by_day = dict(zip(s.dates, s.values, strict=True))
        ax.plot(
            window,
            [by_day.get(day, math.nan) for day in window],  # a day without a point breaks the line
            label=s.entity,
            color=colors[s.entity],
            linewidth=3.0 if s.is_own_brand else 1.7,
            marker="o",
            markersize=4 if s.is_own_brand else 2.5,
            zorder=3 if s.is_own_brand else 2,
        )
    measured = set(section.measured_days) or {day for s in section.share_of_voice for day in s.dates}
    missing = [day for day in window if day not in measured]
    for day in missing:  # not measured: shaded, and no line drawn across it
        ax.axvspan(
            day - dt.timedelta(hours=12), day + dt.timedelta(hours=12), color=NOT_MEASURED_COLOR, zorder=0
        )
    top = max(v for s in section.share_of_voice for v in s.values)
    ax.set_ylim(0, max(10.0, math.ceil(top * 1.15 / 5) * 5))
    ax.set_xlim(data.start, data.last_day)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=100, decimals=0))
    ax.set_ylabel("Share of voice", fontsize=11)
    locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
    ax.grid(axis="y", color="#e4e7eb", linewidth=0.8)
    handles, labels = ax.get_legend_handles_labels()
    if missing:
        from matplotlib.patches import Patch

        handles.append(Patch(color=NOT_MEASURED_COLOR))
        labels.append(f"not measured ({len(missing)} day{'s' if len(missing) > 1 else ''})")
    legend = ax.legend(
        handles,
        labels,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.09),
        ncol=min(4, len(labels)),
        frameon=False,
        fontsize=11,
        handlelength=1.8,
    )
    for text, s in zip(legend.get_texts(), section.share_of_voice, strict=False):
        if s.is_own_brand:
            text.set_fontweight("bold")


def _draw_engine_grid(ax: Axes, grid: EngineGrid) -> None:
    import numpy as np

    _tidy(ax, "Visibility score by engine (0-100)")
    if not grid.entities or not grid.engines:
        _no_data(ax)
        return
    values = np.array([[np.nan if v is None else v for v in row] for row in grid.scores], dtype=float)
    vmax = max(10.0, math.ceil(float(np.nanmax(values)) / 10) * 10) if np.isfinite(values).any() else 100.0
    ax.imshow(values, cmap="Blues", vmin=0, vmax=vmax * 1.15, aspect="auto")
    for (i, j), v in np.ndenumerate(values):
        label = DASH if math.isnan(v) else f"{v:.0f}"
        dark = not math.isnan(v) and v > 0.6 * vmax
        ax.text(j, i, label, ha="center", va="center", fontsize=11, color="white" if dark else "#1f2933")
    labels = [ENGINE_LABELS.get(e, e) for e in grid.engines]
    ax.set_xticks(range(len(grid.engines)), labels, rotation=35, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(len(grid.entities)), grid.entities)
    ax.tick_params(labelsize=11, length=0)
    ax.get_yticklabels()[0].set_fontweight("bold")  # the own brand comes first
    ax.spines[:].set_visible(False)


def _draw_top_pages(
    ax: Axes, pages: tuple[PageTrend, ...], colors: dict[str, str], change_label: str
) -> None:
    from matplotlib.transforms import blended_transform_factory

    _tidy(ax, "Top cited pages, all engines")
    # the change column's heading, on a line of its own under the title (side by side, they overprint)
    ax.annotate(
        change_label,
        xy=(1.0, 1.0),
        xycoords="axes fraction",
        xytext=(0, 6),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=11,
        color=MUTED,
    )
    if not pages:
        _no_data(ax)
        return
    positions = range(len(pages))
    bar_colors = [colors.get(p.owner or "", THIRD_PARTY_COLOR) for p in pages]
    bars = ax.barh(positions, [p.citations for p in pages], color=bar_colors, height=0.62)
    ax.bar_label(bars, [f"{p.citations:,}" for p in pages], padding=4, fontsize=11)
    ax.set_yticks(positions, [_short_url(p.url) for p in pages], fontsize=11)
    ax.invert_yaxis()  # the most cited on top
    ax.tick_params(axis="y", length=0)
    widest = max(p.citations for p in pages)
    ax.set_xlim(0, max(1, widest) * 1.45)  # room for the count and, right-aligned, the change
    ax.set_xlabel("Citations in the window", fontsize=11)
    ax.grid(axis="x", color="#e4e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    change_column = blended_transform_factory(ax.transAxes, ax.transData)
    for y, page in zip(positions, pages, strict=True):
        ax.text(
            1.0,
            y,
            _change_text(page),
            transform=change_column,
            ha="right",
            va="center",
            fontsize=11,
            fontweight="bold",
            color=_change_color(page),
        )


# --- small helpers ------------------------------------------------------------------------------


def _tidy(ax: Axes, title: str) -> None:
    ax.set_title(title, loc="left", fontsize=13, color="#1f2933", pad=TITLE_PAD)
    ax.spines[["top", "right"]].set_visible(False)
    ax.tick_params(labelsize=11)


def _no_data(ax: Axes) -> None:
    ax.text(0.5, 0.5, "no data in this window", ha="center", va="center", color=MUTED, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _entity_colors(section: BrandSection) -> dict[str, str]:
    competitors = [s.entity for s in section.share_of_voice if not s.is_own_brand]
    competitors += [e for e in section.visibility.entities if e not in competitors and e != section.name]
    colors = {e: COMPETITOR_COLORS[i % len(COMPETITOR_COLORS)] for i, e in enumerate(competitors)}
    for s in section.share_of_voice:
        if s.is_own_brand:
            colors[s.entity] = OWN_COLOR
    colors[section.name] = OWN_COLOR
    return colors


def _brand_title(section: BrandSection) -> str:
    parts = [section.name]
    if section.domain:
        parts.append(section.domain)
    ranked = sorted(section.share_of_voice, key=lambda s: -s.mean)
    own = next((s for s in ranked if s.is_own_brand), None)
    if own is not None:
        parts.append(f"share of voice {own.mean:.1f}% (#{ranked.index(own) + 1} of {len(ranked)})")
    return "   ·   ".join(parts)


def _window_text(data: ReportData) -> str:
    days = (data.end - data.start).days
    return (
        f"{data.start:%d %b %Y} {DASH} {data.last_day:%d %b %Y} ({days} days, newest landed day last)   ·   "
        f"generated {data.generated_at:%Y-%m-%d %H:%M} UTC"
        + (f"   ·   {data.brands_left_out} more brand(s) not shown" if data.brands_left_out else "")
    )


def _change_title(section: BrandSection) -> str:
    days = section.compared_days
    return f"change: last {days} measured day{'s' if days != 1 else ''} vs the {days} before"


def _change_text(page: PageTrend) -> str:
    change = page.change_pct
    if change is None:
        return "new" if page.later else DASH
    arrow = "▲" if change > 0.5 else "▼" if change < -0.5 else "►"
    return f"{arrow} {abs(change):.0f}%"


def _change_color(page: PageTrend) -> str:
    change = page.change_pct
    if change is None or abs(change) <= 0.5:
        return MUTED
    return UP_COLOR if change > 0 else DOWN_COLOR


def _page_link(url: str) -> str:
    """A live link only for an http(s) URL with a host; anything else (``javascript:``, ``data:``, a
    scheme hidden behind blanks or control characters) is shown as text, never made clickable."""
    shown = html.escape(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return shown
    clean = url == url.strip() and url.isprintable()
    if clean and parts.scheme.lower() in ("http", "https") and parts.netloc:
        return f'<a href="{shown}">{shown}</a>'
    return shown


def _short_url(url: str) -> str:
    """Host on one line, path on the next, each cut to ``MAX_URL_CHARS``: labels of one width."""
    host, _, path = url.split("://", 1)[-1].removeprefix("www.").partition("/")
    lines = [host] + ([f"/{path.rstrip('/')}"] if path.strip("/") else [])
    return "\n".join(
        line if len(line) <= MAX_URL_CHARS else line[: MAX_URL_CHARS - 1] + "\u2026" for line in lines
    )
