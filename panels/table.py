"""A fast read-only table: rows of Rich Text cells drawn with Textual's line API.

Textual's DataTable measures and renders every cell through a Rich console and redraws
whole tables on change; at a stage or more per second with ~100 probe rows that cost
hundreds of milliseconds a frame on a small CPU, on the same interpreter as the engine.
This table lays a row out once (cells cut and padded to their column, joined into one Text)
and turns only the visible rows into strips, cached until the rows change. The header stays
put while the rows scroll; one row is the cursor.

The parts of DataTable's API the panels use are kept (add_columns, add_rows, clear,
row_count, cursor_row, move_cursor, get_row_at, RowHighlighted), so panels read the same,
with one difference that matters: only the user's moves (keys, clicks) post RowHighlighted.
A panel that moves the cursor to show what the app selected must not echo a selection back:
two panels showing the same slot would otherwise answer each other's echoes, and a burst of
keys left stale echoes that flipped the slot back and forth forever.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

GAP = 1  # spaces between columns
MAX_WIDTH = 24  # no auto-sized column grows wider (cells are cut with an ellipsis)


def same_row(a: Sequence[Text], b: Sequence[Text]) -> bool:
    """Two rows lay out the same (Text's == compares only the characters and spans)."""
    return len(a) == len(b) and all(
        x.plain == y.plain and x.style == y.style and x.justify == y.justify
        and x.overflow == y.overflow and x.spans == y.spans for x, y in zip(a, b))


class FastTable(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    FastTable { height: auto; max-height: 100%; scrollbar-size: 1 1; }
    FastTable > .fast-table--header { text-style: bold; background: $panel; }
    FastTable > .fast-table--odd { background: $boost; }
    FastTable > .fast-table--cursor { background: $primary 40%; }
    FastTable:focus > .fast-table--cursor { background: $primary; }
    """
    COMPONENT_CLASSES = {"fast-table--header", "fast-table--odd", "fast-table--cursor"}
    BINDINGS = [
        Binding("up", "cursor(-1)", show=False, tooltip="the row above (in ranks and selector: the slot)"),
        Binding("down", "cursor(1)", show=False, tooltip="the row below"),
        Binding("pageup", "page(-1)", show=False, tooltip="a page up"),
        Binding("pagedown", "page(1)", show=False, tooltip="a page down"),
        Binding("home", "cursor_to(0)", show=False),
        Binding("end", "cursor_to(-1)", show=False),
    ]

    class RowHighlighted(Message):
        def __init__(self, table: "FastTable", cursor_row: int) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row

        @property
        def control(self) -> "FastTable":
            return self.table

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None,
                 max_widths: Optional[dict[int, int]] = None, grow_only: bool = True,
                 frozen: int = 0) -> None:
        """grow_only: the scrollable height never shrinks (no layout pass when a long table
        is refilled from its start); off for short tables sized to their rows. frozen: the
        leading columns that name a row (a slot, a buffer) stay put when it scrolls sideways."""
        super().__init__(id=id, classes=classes)
        self._grow_only = grow_only
        self._frozen = frozen
        self._held = 0  # cells the frozen columns take in this paint (0: not scrolled)
        self._front = (0, 0)  # the scrolling column at the front, and the scroll_x put it there
        self._labels: list[Text] = []
        self._rows: list[list[Text]] = []
        self._widths: list[int] = []
        self._max_widths = max_widths or {}
        self._lines: dict[int, Strip] = {}  # row index -> laid-out strip (no cursor / zebra)
        self._header: Optional[Strip] = None
        self.cursor_row = 0
        self._scroll_pending = False  # the cursor moved while the table had no size
        # move_cursor(centre=True)'s row: out of view, it comes in mid-view, also after a
        # resize (a table first laid out taller, then shrunk, would leave it at the edge)
        self._centre_row: Optional[int] = None

    # ---- DataTable-like API --------------------------------------------------------------

    class HeaderSelected(Message):
        """The user clicked a column's header."""

        def __init__(self, table: "FastTable", column: int) -> None:
            super().__init__()
            self.table = table
            self.column = column

        @property
        def control(self) -> "FastTable":
            return self.table

    def add_columns(self, *labels: "str | Text") -> None:
        """Set the columns (replacing any: their widths are measured afresh). A Text label
        keeps its justify (a header over right-justified numbers)."""
        self._labels = [label if isinstance(label, Text) else Text(label) for label in labels]
        self._widths = []
        self._relayout(shrink=True)
        if self.scroll_x:  # other columns: a scroll into the old ones would start mid-column
            self.scroll_to(x=0, animate=False, immediate=True, force=True)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(label.plain for label in self._labels)

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def get_row_at(self, index: int) -> list[Text]:
        return self._rows[index]

    def clear(self) -> "FastTable":
        self._rows = []
        self.cursor_row = 0
        self._lines.clear()
        self.refresh()
        return self

    def add_rows(self, rows: Iterable[Sequence]) -> None:
        new = [[c if isinstance(c, Text) else Text(str(c)) for c in row] for row in rows]
        if not new:
            return
        self._rows.extend(new)
        widths = self._measure(new, self._widths)
        if widths != self._widths:  # a column grew: every row is laid out again
            self._widths = widths
            self._lines.clear()
            self._header = None
        self._resize()
        self.refresh()

    def set_rows(self, rows: Iterable[Sequence]) -> None:
        """Replace every row, keeping the cursor where it was when it still fits. Column
        widths only grow, so rounds that show the same kind of rows lay out the same, and
        a row drawn the same as before keeps its laid-out line (laying a row out is most of
        painting one: a tab shown again, the aggregates' buffers, repaints few)."""
        old_rows, old_widths = self._rows, self._widths
        self._rows = [[c if isinstance(c, Text) else Text(str(c)) for c in row] for row in rows]
        self._widths = self._measure(self._rows, self._widths)
        if self._widths == old_widths:
            self._lines = {i: line for i, line in self._lines.items()
                           if i < len(self._rows) and same_row(self._rows[i], old_rows[i])}
        else:
            self._lines = {}
            self._header = None
        self._resize()
        self.cursor_row = min(self.cursor_row, max(len(self._rows) - 1, 0))
        self.refresh()

    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True,
                    centre: bool = False) -> bool:
        """Put the cursor on `row` (clamped); True when it moved. Posts nothing: this is how
        the app shows a selection it already knows about. `centre`: a row out of view comes
        in mid-view, with the rows after it, rather than at the view's edge."""
        if not self._rows:
            return False
        row = max(0, min(row, len(self._rows) - 1))
        changed = row != self.cursor_row
        self.cursor_row = row
        if scroll:
            self._centre_row = row if centre else None
            self._scroll_pending = True
            self._scroll_to_cursor()  # a hidden table has no size yet: scrolled once painted
        self.refresh()
        return changed

    def on_resize(self) -> None:
        # Shown (a tab switch: a table in a hidden tab has no size) or resized: the cursor
        # row comes into view, and a sideways scroll that Textual clamped to a wider view's
        # end (zoomed, m) goes back to a column's edge.
        self._scroll_to_cursor()
        self._keep_columns_whole()

    # ---- keys and mouse: the user's moves, announced -----------------------------------------

    def _user_move(self, row: int, scroll: bool = True) -> None:
        if self.move_cursor(row=row, scroll=scroll):
            self.post_message(self.RowHighlighted(self, self.cursor_row))

    def action_cursor(self, step: int) -> None:
        self._user_move(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self._user_move(self.cursor_row + step * max(self.scrollable_content_region.height - 2, 1))

    def action_cursor_to(self, row: int) -> None:
        self._user_move(row if row >= 0 else len(self._rows) - 1)

    def on_click(self, event: events.Click) -> None:
        if event.y >= 1:
            self._user_move(int(self.scroll_offset.y) + event.y - 1, scroll=False)
            return
        x, left = event.x, GAP
        if x >= self._frozen_width():
            x += int(self.scroll_offset.x)
        for index, width in enumerate(self._widths):
            if left <= x < left + width + GAP:
                self.post_message(self.HeaderSelected(self, index))
                return
            left += width + GAP

    # ---- layout --------------------------------------------------------------------------

    def _measure(self, rows: list[list[Text]], widths: list[int]) -> list[int]:
        widths = list(widths) or [label.cell_len for label in self._labels]
        for row in rows:
            for i, cell in enumerate(row):
                if i < len(widths):
                    widths[i] = max(widths[i], min(cell.cell_len, self._max_widths.get(i, MAX_WIDTH)))
        return widths

    def _relayout(self, shrink: bool = False) -> None:
        self._widths = self._measure(self._rows, self._widths)
        self._lines.clear()
        self._header = None
        self._resize(shrink)
        self.refresh()

    def _resize(self, shrink: bool = False) -> None:
        # The virtual size only grows: a change of it is a layout pass of the whole screen,
        # and a table that shrinks at every new round and grows back would cost two a round.
        # New columns (shrink) start afresh.
        width = sum(self._widths) + GAP * (len(self._widths) + 1)
        old = Size(0, 0) if shrink else self.virtual_size
        height = len(self._rows) + 1
        size = Size(max(width, old.width), max(height, old.height) if self._grow_only else height)
        if size != old:
            self.virtual_size = size
        self._lines = {i: s for i, s in self._lines.items() if i < len(self._rows)}
        self._keep_columns_whole()

    def _scroll_to_cursor(self) -> None:
        height = self.scrollable_content_region.height
        if not height:
            return  # hidden (its tab not shown): render_lines scrolls when it is painted
        self._scroll_pending = False
        visible = max(height - 1, 1)  # rows under the header
        top = int(self.scroll_offset.y)
        if self._centre_row == self.cursor_row and not top <= self.cursor_row < top + visible:
            # immediate: a later call in the same refresh reads the offset this one set
            self.scroll_to(y=max(self.cursor_row - visible // 2, 0), animate=False, immediate=True)
        elif self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)

    def _layout_row(self, cells: Sequence[Text]) -> Strip:
        line = Text(" " * GAP, no_wrap=True, end="")
        for cell, width in zip(cells, self._widths):
            cell = cell.copy()
            cell.truncate(width, overflow="ellipsis")
            pad = width - cell.cell_len
            if cell.justify == "right":
                line.append(" " * pad)
                line.append_text(cell)
            else:
                line.append_text(cell)
                line.append(" " * pad)
            line.append(" " * GAP)
        segments = list(line.render(self.app.console))
        return Strip(segments, line.cell_len)

    def render_lines(self, crop):
        if self._scroll_pending:
            # The cursor moved while the table was hidden. A Resize when its tab is shown
            # cannot be counted on (Textual sends none to a widget its lazily rebuilt map
            # already holds), painting can: the rows drawn now are those at the new offset.
            self._scroll_to_cursor()
        # the row styles come from CSS: look them up once per paint, not once per line
        base = self.rich_style
        self._held = self._frozen_width()  # once per paint, not once per line
        self._styles = {
            "base": base,
            "header": base + self.get_component_rich_style("fast-table--header"),
            "odd": base + self.get_component_rich_style("fast-table--odd"),
            "cursor": base + self.get_component_rich_style("fast-table--cursor"),
        }
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        styles = getattr(self, "_styles", None) or {k: self.rich_style for k in ("base", "header", "odd", "cursor")}
        base = styles["base"]
        if y == 0:
            if self._header is None:
                self._header = self._layout_row(self._labels)
            return self._finish(self._header, scroll_x, width, styles["header"])
        index = int(scroll_y) + y - 1
        if index >= len(self._rows):
            return Strip.blank(width, base)
        strip = self._lines.get(index)
        if strip is None:
            strip = self._lines[index] = self._layout_row(self._rows[index])
        style = styles["cursor"] if index == self.cursor_row else styles["odd"] if index % 2 else base
        return self._finish(strip, scroll_x, width, style)

    def scroll_columns(self, step: int, waited: bool = False) -> None:
        """Scroll sideways by whole columns, past the frozen ones: a scrolling column always
        starts at the front, and the last stop is the first one that shows every column left.
        A table not laid out yet (its tab shown by the key before this one) does it once it
        is, if it is then. Past either end: the bell."""
        if not self.size.width:
            if not waited:
                self.call_after_refresh(self.scroll_columns, step, True)
            return
        edges = self._edges()
        if not edges:
            return
        x = int(self.scroll_x)
        front = max(i for i, edge in enumerate(edges) if edge <= x)
        if step < 0 and edges[front] < x:  # between two edges (scrolled by mouse): the nearer
            front += 1
        front = min(max(front + step, 0), len(edges) - 1)
        if edges[front] == x:
            self.app.bell()
            return
        self._front = (front, edges[front])
        self._scroll_to_edge(edges[front])

    def _edges(self) -> list[int]:
        """scroll_x that brings each scrolling column to the front, up to the first that
        leaves every later column in view (the trailing gap may fall off the edge)."""
        held = self._held_columns()
        view = self.scrollable_content_region.width - (
            GAP + sum(w + GAP for w in self._widths[:held]) if held else 0)
        widths = self._widths[held:]
        total = sum(w + GAP for w in widths) - GAP
        edges, left = [], 0
        for width in widths:
            edges.append(left)
            if left + view >= total:
                break
            left += width + GAP
        return edges

    def _scroll_to_edge(self, x: int) -> None:
        # the last stop may lie past Textual's max_scroll_x (the room right of the last
        # column): widen the scrollable width to reach it
        needed = x + self.scrollable_content_region.width
        if needed > self.virtual_size.width:
            self.virtual_size = Size(needed, self.virtual_size.height)
        # force: a table may hide its scrollbar (overflow-x: hidden, to give its line to a
        # row) and still scroll by whole columns
        self.scroll_to(x=x, animate=False, immediate=True, force=True)

    def _keep_columns_whole(self) -> None:
        """After the widths changed: a scroll that no longer starts at a column's edge goes
        back to the edge of the column it stood on."""
        x = int(self.scroll_x)
        if not x or not self.size.width:
            return
        edges = self._edges()
        if not edges:
            return
        front, at = self._front
        if at != x:  # scrolled some other way (the mouse): the column under the front
            front = max(i for i, edge in enumerate(edges) if edge <= x)
        front = min(front, len(edges) - 1)
        if edges[front] != x:
            self._front = (front, edges[front])
            self._scroll_to_edge(edges[front])

    def _held_columns(self) -> int:
        """The frozen columns, unless they would take more than two thirds of the width:
        then the rest would have too little room to scroll through, and nothing is held."""
        if not self._frozen or not self._widths:
            return 0
        held = GAP + sum(w + GAP for w in self._widths[:self._frozen])
        return self._frozen if held <= self.size.width * 2 // 3 else 0

    def _frozen_width(self) -> int:
        """Cells of the held columns with their gaps (0 while the table is not scrolled:
        then nothing needs holding)."""
        held = self._held_columns()
        if not held or not int(self.scroll_offset.x):
            return 0
        return GAP + sum(w + GAP for w in self._widths[:held])

    def _finish(self, strip: Strip, scroll_x: int, width: int, style: Style) -> Strip:
        held = min(self._held, width)
        if held:
            strip = Strip.join([strip.crop(0, held), strip.crop(held + scroll_x, scroll_x + width)])
        else:
            strip = strip.crop(scroll_x, scroll_x + width)
        strip = strip.extend_cell_length(width)
        return Strip([Segment(t, style + s if s else style, c) for t, s, c in strip], width)
