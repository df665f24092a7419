"""Small charts as inline SVG, drawn on the server: bars (a value per label) and lines (series of
points). Labels are escaped like any other text; colours come from the stylesheet's classes, so
the SVG carries no style attribute."""

from __future__ import annotations

from collections.abc import Sequence

from lessonbank.server.ui.html import esc

WIDTH, HEIGHT = 560, 180
LEFT, BOTTOM, TOP = 44, 26, 10


def _axis(top: float, unit: str) -> str:
    """The frame and the y labels (0 and the top value)."""
    base = HEIGHT - BOTTOM
    return (
        f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/>'
        f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - 4}" y2="{base}"/>'
        f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{esc(_fmt(top, unit))}</text>'
        f'<text class="tick" x="{LEFT - 4}" y="{base}" text-anchor="end">0</text>'
    )


def _fmt(value: float, unit: str) -> str:
    if unit == "$":
        return f"${value:.4f}" if value < 1 else f"${value:.2f}"
    return f"{value:g}" if value != int(value) else str(int(value))


def bars(title: str, points: Sequence[tuple[str, float]], *, unit: str = "", tone: str = "bar") -> str:
    """A bar per (label, value), labels under the bars (every few when there are many)."""
    if not points:
        return f'<figure class="chart"><figcaption>{esc(title)}</figcaption><p class="empty">No data yet.</p></figure>'
    top = max(value for _, value in points) or 1.0
    span = (WIDTH - LEFT - 8) / len(points)
    width = min(48.0, max(2.0, span * 0.7))
    base = HEIGHT - BOTTOM
    every = max(1, len(points) // 8)
    parts = [_axis(top, unit)]
    for index, (label, value) in enumerate(points):
        x = LEFT + 4 + index * span
        h = (base - TOP) * (value / top)
        parts.append(
            f'<rect class="{esc(tone)}" x="{x:.1f}" y="{base - h:.1f}" width="{width:.1f}" height="{h:.1f}">'
            f"<title>{esc(label)}: {esc(_fmt(value, unit))}</title></rect>"
        )
        if index % every == 0:
            parts.append(
                f'<text class="tick" x="{x + width / 2:.1f}" y="{base + 14}" text-anchor="middle">{esc(label)}</text>'
            )
    return _figure(title, "".join(parts))


def lines(title: str, series: Sequence[tuple[str, Sequence[float]]], *, top: float = 1.0) -> str:
    """A polyline per (name, values) over the iterations 1..n, y from 0 to ``top``."""
    drawn = [(name, values) for name, values in series if values]
    if not drawn:
        return f'<figure class="chart"><figcaption>{esc(title)}</figcaption><p class="empty">No data yet.</p></figure>'
    longest = max(len(values) for _, values in drawn)
    base = HEIGHT - BOTTOM
    step = (WIDTH - LEFT - 16) / max(1, longest - 1)
    parts = [_axis(top, "")]
    for index in range(longest):
        x = LEFT + 8 + index * step
        parts.append(
            f'<text class="tick" x="{x:.1f}" y="{base + 14}" text-anchor="middle">{index + 1}</text>'
        )
    for number, (name, values) in enumerate(drawn):
        coords = " ".join(
            f"{LEFT + 8 + i * step:.1f},{base - (base - TOP) * min(1.0, v / top):.1f}"
            for i, v in enumerate(values)
        )
        parts.append(
            f'<polyline class="series s{number % 6}" points="{coords}"><title>{esc(name)}</title></polyline>'
        )
    return _figure(title, "".join(parts))


def _figure(title: str, inner: str) -> str:
    return (
        f'<figure class="chart"><figcaption>{esc(title)}</figcaption>'
        f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label={_quoted(title)}>{inner}</svg></figure>'
    )


def _quoted(text: str) -> str:
    return f'"{esc(text)}"'
