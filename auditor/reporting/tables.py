"""The one table shape of the terminal reports (no borders, one space between columns), and their label/value lines.

Reports read in 80 columns and are pasted into notes and issues, where box-drawing
characters only add width and noise; every borderless table starts here so they all
line up the same way.
"""

from __future__ import annotations

import textwrap
from collections.abc import Collection, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text


def borderless_table() -> Table:
    """An empty table with bold headers, no borders and one space between columns (none at the edges)."""
    return Table(box=None, padding=(0, 1), collapse_padding=True, show_edge=False, pad_edge=False, header_style="bold")


def say_facts(console: Console, rows: Sequence[tuple[str, str]], indent: int = 2, gap: int = 3) -> None:
    """Labels and their values, indented, the values in one column: on a narrow terminal a long value wraps under
    itself, not under the labels (printed as lines, its second line started at column 0). No line carries
    trailing spaces, and a word longer than the column (a path) is left whole for the terminal to fold."""
    label_width = max((len(label) for label, _ in rows), default=0)
    start = indent + label_width + gap
    width = max(console.width - start, MIN_FACT_WIDTH)
    for label, value in rows:
        lines = textwrap.wrap(value, width, break_long_words=False, break_on_hyphens=False) or [""]
        console.print(Text(" " * indent + label.ljust(label_width + gap) + lines[0]), soft_wrap=True)
        for line in lines[1:]:
            console.print(Text(" " * start + line), soft_wrap=True)


#: The narrowest column :func:`say_facts` wraps its values to, however narrow the terminal.
MIN_FACT_WIDTH = 20


#: Narrowest a wrapping value column gets (a score beside its interval): a bound such as "[-0.00067," stays whole.
WRAPPED_VALUE_WIDTH = 10


def column_table(
    *columns: tuple[str, str], first_min_width: int, bar_width: int | None = None, wrapping: Collection[str] = ()
) -> Table:
    """A borderless table of ``columns`` (header, justify): the first (a prompt, a concept) wraps and is at
    least ``first_min_width`` wide, the others never wrap except those headed as in ``wrapping`` (a value and
    its interval, which break between the two on a narrow terminal instead of pushing a column out); with
    ``bar_width``, a column headed "bar" is an unheaded column that wide, for ranked bars."""
    table = borderless_table()
    for i, (header, justify) in enumerate(columns):
        if i == 0:
            table.add_column(header, justify=justify, overflow="fold", ratio=1, min_width=first_min_width)
        elif bar_width is not None and header == "bar":
            table.add_column("", width=bar_width, no_wrap=True)
        elif header in wrapping:
            table.add_column(header, justify=justify, min_width=WRAPPED_VALUE_WIDTH)
        else:
            table.add_column(header, justify=justify, no_wrap=True)
    return table
