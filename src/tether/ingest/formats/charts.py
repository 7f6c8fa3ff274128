"""Charts in presentations, read as the table of numbers they draw.

A chart on a slide ("Sales by quarter", a column per region) holds its data: its title,
each series' name and values, and the categories they are plotted against. A reader asks
"what were the sales in the 3rd quarter?" of the slide, so a chart is read as
``Chart: <title>`` and then a line per category that names each series' value, the way a
sheet's rows are read (:func:`~tether.ingest.formats.tables.table_lines`), under the
category axis's title (else "Category"): ``Quarter: 1st Qtr; Sales: 8.2; Costs: 3.1``.
The chart is one block, so that its title stays with its data. Categories with several
levels read as their path ("Europe / London"); categories on a date axis (stored as
Excel's day numbers) read as dates; a chart without categories (a scatter chart) reads
as each series' values. A chart whose title is not set is titled by its one series'
name, as PowerPoint draws it.
At most :data:`MAX_POINTS` categories of a chart are read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from tether.ingest.formats.tables import cell_text, table_lines

#: Categories of one chart read at most (a chart of more is drawn as a curve, not read).
MAX_POINTS = 1_000
_EXCEL_EPOCH = dt.date(1899, 12, 30)


def chart_blocks(chart: Any) -> Iterator[str]:
    """A chart's text blocks: its title line, then its data (see the module)."""
    try:
        plots = [(_categories(chart, plot), list(plot.series)) for plot in chart.plots]
    except (AttributeError, KeyError, ValueError, NotImplementedError, IndexError):
        return  # a chart python-pptx cannot read: its slide's other text still is
    series = [s for _, group in plots for s in group]
    title = _title(chart)
    if not title and len(series) == 1:
        title = str(series[0].name or "")
    lines = [f"Chart: {title}" if title else "Chart:"]
    axis = _axis_title(chart) or "Category"
    for categories, group in plots:
        if not group:
            continue
        if not categories:
            for s in group:
                values = [cell_text(v) for v in list(s.values)[:MAX_POINTS] if v is not None]
                lines.append(f"{s.name}: {', '.join(values)}" if s.name else ", ".join(values))
            continue
        rows = [[axis, *(str(s.name or f"Series {i}") for i, s in enumerate(group, start=1))]]
        columns = [list(s.values) for s in group]
        for i, category in enumerate(categories[:MAX_POINTS]):
            values = [cell_text(c[i]) if i < len(c) and c[i] is not None else "" for c in columns]
            rows.append([category, *values])
        lines += table_lines(rows, header=True)
    yield "\n".join(lines)


def _axis_title(chart: Any) -> str:
    """The category axis's title, when it has one (what the categories are: "Quarter")."""
    try:
        axis = chart.category_axis
        if axis.has_title and axis.axis_title.has_text_frame:
            return " ".join(str(axis.axis_title.text_frame.text).split())
    except (AttributeError, KeyError, ValueError):  # a pie chart has no category axis
        pass
    return ""


def _title(chart: Any) -> str:
    try:
        if chart.has_title and chart.chart_title.has_text_frame:
            return " ".join(str(chart.chart_title.text_frame.text).split())
    except (AttributeError, KeyError, ValueError):
        pass
    return ""


def _categories(chart: Any, plot: Any) -> list[str]:
    """The plot's category labels (a path for several levels; dates on a date axis)."""
    categories = plot.categories
    if categories.depth == 0:
        return []
    if categories.depth > 1:
        return [" / ".join(str(part) for part in path) for path in categories.flattened_labels]
    labels = [str(label) for label in categories]
    if _date_axis(chart):
        return [_as_date(label) for label in labels]
    return labels


def _date_axis(chart: Any) -> bool:
    try:
        return type(chart.category_axis).__name__ == "DateAxis"
    except (ValueError, AttributeError, KeyError):  # a pie chart has no category axis
        return False


def _as_date(label: str) -> str:
    """An Excel day number as an ISO date ("37261.0" is 2002-01-05); other labels as
    they are."""
    try:
        days = float(label)
    except ValueError:
        return label
    if not days.is_integer() or not 0 < days < 2_958_466:  # up to 9999-12-31
        return label
    return (_EXCEL_EPOCH + dt.timedelta(days=int(days))).isoformat()
