"""Line charts as inline SVG, drawn on the server. Pure.

:func:`line_chart` takes series of (time, value) points and returns an ``<svg>`` element:
the y axis runs from 0 to the largest value (at least 1), the x axis over the window the
points span, the time axis labelled in seconds before the newest point. Labels are
escaped; the numbers are formatted by :func:`human`.
"""

from __future__ import annotations

from html import escape

WIDTH, HEIGHT = 640, 180
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 12, 24
COLOURS = ("#2f6fbf", "#d9822b", "#3a9b5a", "#a34fbf", "#c0392b")


def human(value: float) -> str:
    """1234 -> ``1.2k``, 2500000 -> ``2.5M``; small values to two significant places."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    if value == int(value):
        return str(int(value))
    return f"{value:.2g}" if abs(value) < 1 else f"{value:.1f}"


def line_chart(series: dict[str, list[tuple[float, float]]], unit: str = "") -> str:
    points = [p for pts in series.values() for p in pts]
    w, h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}"'
        ' xmlns="http://www.w3.org/2000/svg" role="img">',
        f'<rect x="{_LEFT}" y="{_TOP}" width="{w}" height="{h}" fill="#fafafa" stroke="#ccc"/>',
    ]
    if not points:
        parts.append(
            f'<text x="{_LEFT + w / 2}" y="{_TOP + h / 2}" text-anchor="middle" fill="#777">'
            "no samples yet</text></svg>"
        )
        return "".join(parts)
    t0, t1 = min(t for t, _ in points), max(t for t, _ in points)
    span = max(t1 - t0, 1e-9)
    top = max(1.0, max(v for _, v in points))

    def x(t: float) -> float:
        return _LEFT + (t - t0) / span * w if t1 > t0 else _LEFT + w

    def y(v: float) -> float:
        return _TOP + h - v / top * h

    for frac in (0.0, 0.5, 1.0):
        yy = y(top * frac)
        parts.append(
            f'<line x1="{_LEFT}" x2="{_LEFT + w}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#e3e3e3"/>'
            f'<text x="{_LEFT - 4}" y="{yy + 4:.1f}" text-anchor="end" font-size="11">'
            f"{escape(human(top * frac))}{escape(unit)}</text>"
        )
    parts.append(
        f'<text x="{_LEFT}" y="{HEIGHT - 6}" font-size="11">-{human(round(t1 - t0))}s</text>'
        f'<text x="{_LEFT + w}" y="{HEIGHT - 6}" font-size="11" text-anchor="end">now</text>'
    )
    for i, (name, pts) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        if pts:
            path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>'
            )
        parts.append(
            f'<text x="{_LEFT + 8 + i * 150}" y="{_TOP + 14}" font-size="12" fill="{colour}">'
            f"{escape(name)}{': ' + escape(human(pts[-1][1])) if pts else ''}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)
