"""The one table shape of the terminal reports: no borders, one space between columns.

Reports read in 80 columns and are pasted into notes and issues, where box-drawing
characters only add width and noise; every borderless table starts here so they all
line up the same way.
"""

from __future__ import annotations

from rich.table import Table


def borderless_table() -> Table:
    """An empty table with bold headers, no borders and one space between columns (none at the edges)."""
    return Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False, header_style="bold")
