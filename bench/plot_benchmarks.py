#!/usr/bin/env python3
"""Turns benchmark figures (JSON) into SVG bar charts, one file per chart.

    python3 bench/plot_benchmarks.py bench/results/benchmarks.json docs/benchmarks

Input: {"charts": [{"id", "title", "source", "unit", "log_scale", "groups": [...],
"series": [{"name", "values": [one per group]}]}]}. Output: <out dir>/<id>.svg, horizontal
grouped bars with each bar's value written beside it, so a reader sees the shape at once and can
still read the number. Python standard library only; the same input gives byte-identical files.
"""
import json
import math
import pathlib
import sys
from xml.sax.saxutils import escape

COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
WIDTH = 760
LEFT = 190  # room for the group labels
RIGHT = 90  # room for the value beside the longest bar
BAR = 16
GAP = 12  # between groups
FONT = "font-family=\"DejaVu Sans, Arial, sans-serif\""


def number(v):
    """12,345 for large values, 0.252 for small ones: what the tables print."""
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def tick(t):
    """1, 10, 1,000, 0.1: axis labels without trailing zeros."""
    if t >= 1 and t == int(t):
        return f"{int(t):,}"
    return f"{t:g}"


def scale(chart):
    """Returns a function mapping a value to a bar length in pixels, and the axis ticks."""
    values = [v for s in chart["series"] for v in s["values"] if v is not None]
    span = WIDTH - LEFT - RIGHT
    if chart.get("log_scale"):
        low = 10 ** math.floor(math.log10(min(v for v in values if v > 0)))
        high = 10 ** math.ceil(math.log10(max(values)))
        ticks = []
        t = low
        while t <= high * 1.0001:
            ticks.append(t)
            t *= 10
        def length(v):
            return 0 if v <= 0 else span * (math.log10(v) - math.log10(low)) / (
                math.log10(high) - math.log10(low))
        return length, ticks
    high = max(values)
    step = 10 ** math.floor(math.log10(high))
    for mult in (1, 2, 5, 10):
        if high / (step * mult) <= 6:
            step *= mult
            break
    top = step * math.ceil(high / step)
    ticks = [i * step for i in range(int(round(top / step)) + 1)]
    return (lambda v: span * v / top), ticks


def svg(chart):
    groups = chart["groups"]
    series = chart["series"]
    for s in series:
        if len(s["values"]) != len(groups):
            raise ValueError(f"{chart['id']}: series {s['name']} has {len(s['values'])} values "
                             f"for {len(groups)} groups")
    length, ticks = scale(chart)
    top = 64
    group_height = len(series) * BAR + GAP
    plot_height = len(groups) * group_height
    legend_top = top + plot_height + 56
    height = legend_top + 22 * math.ceil(len(series) / 3) + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
           f'<text x="10" y="22" {FONT} font-size="15" font-weight="bold">'
           f'{escape(chart["title"])}</text>',
           f'<text x="10" y="42" {FONT} font-size="11" fill="#555">'
           f'{escape(chart["source"])}</text>']
    # Axis: ticks and grid lines, the unit under them.
    for t in ticks:
        x = LEFT + length(t)
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{top + plot_height}" '
                   f'stroke="#ddd"/>')
        out.append(f'<text x="{x:.1f}" y="{top + plot_height + 14}" {FONT} font-size="10" '
                   f'text-anchor="middle" fill="#555">{tick(t)}</text>')
    out.append(f'<text x="{LEFT + (WIDTH - LEFT - RIGHT) / 2:.1f}" y="{top + plot_height + 28}" '
               f'{FONT} font-size="11" text-anchor="middle">{escape(chart["unit"])}'
               f'{" (log scale)" if chart.get("log_scale") else ""}</text>')
    for g, name in enumerate(groups):
        y0 = top + g * group_height
        out.append(f'<text x="{LEFT - 8}" y="{y0 + len(series) * BAR / 2 + 4:.1f}" {FONT} '
                   f'font-size="12" text-anchor="end">{escape(name)}</text>')
        for i, s in enumerate(series):
            v = s["values"][g]
            y = y0 + i * BAR
            if v is None:
                out.append(f'<text x="{LEFT + 4}" y="{y + BAR - 4}" {FONT} font-size="10" '
                           f'fill="#555">not run</text>')
                continue
            w = max(length(v), 1)
            out.append(f'<rect x="{LEFT}" y="{y}" width="{w:.1f}" height="{BAR - 2}" '
                       f'fill="{COLOURS[i % len(COLOURS)]}"><title>{escape(s["name"])}: '
                       f'{number(v)} {escape(chart["unit"])}</title></rect>')
            out.append(f'<text x="{LEFT + w + 4:.1f}" y="{y + BAR - 4}" {FONT} font-size="10">'
                       f'{number(v)}</text>')
    out.append(f'<line x1="{LEFT}" y1="{top - 4}" x2="{LEFT}" y2="{top + plot_height}" '
               f'stroke="#333"/>')
    for i, s in enumerate(series):
        x = 10 + (i % 3) * 250
        y = legend_top + 22 * (i // 3)
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" '
                   f'fill="{COLOURS[i % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 18}" y="{y}" {FONT} font-size="12">{escape(s["name"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 64
    data = json.loads(pathlib.Path(argv[1]).read_text())
    out_dir = pathlib.Path(argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    for chart in data["charts"]:
        path = out_dir / f'{chart["id"]}.svg'
        path.write_text(svg(chart))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
