"""The key bar at the bottom: the keys of the current screen, in one line of text.

Textual's Footer is a widget per key and rebuilds itself (mounting and styling each one)
whenever the active bindings change, which happens on every focus move; on a small CPU that
rebuild was the slowest part of answering a key. This bar is one widget that redraws its
line only when the keys it shows change. A click on a key presses it.

Hints come in the order of the bindings, those of the groups named in `first` ahead (the
keys a session is driven with); bindings of one compact group (Binding.Group(...,
compact=True)) share a hint, e.g. `←→ round`. A hint that does not fit whole is
left out, never cut; the help screen lists every key. The hints of the actions named in
`keep` (help, and the escape that ends what is going on) are fitted before the others,
wherever they stand, so a user always sees how to get out and how to get help: at 80
columns a search's `n next hit`, wider than `n round`, had left room for `? help` by one
cell (and none for `q quit`).

While a text field has the focus (a question on the status line) the bar shows only the
keys of the field and what holds it (enter, escape, f1 for help): the screen's and the
app's keys are typed into it. Textual leaves out most of those itself, but not every one
(`+` and `-`, whose key names it cannot turn back into characters, stayed in the bar).
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.widgets import Static

PALETTE = ("ctrl+p", "^p", "palette")


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { height: 1; background: $panel; color: $foreground; }
    """

    def __init__(self, first: tuple[str, ...] = (), keep: tuple[str, ...] = (), **kwargs) -> None:
        super().__init__("", **kwargs)
        self._first = first  # group descriptions whose hints lead
        self._keep = keep  # actions whose hints are fitted first
        self._shown: tuple = ()
        # another screen is over this one (a dialog, help, the palette): its keys are that
        # screen's, and the bar below, still in sight under the palette, listed this one's
        self._covered = False
        self._spans: list[tuple[int, int, str]] = []  # (start, end, key) of each hint

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)  # in the first frame already

    def _bindings_changed(self, screen) -> None:
        if not self.is_attached or screen is not self.screen:
            return
        hints, seen = [], {}
        focused = screen.focused
        typing = focused is not None and focused.check_consume_key("a", "a")
        own = set(focused.ancestors_with_self) - {screen, self.app} if typing else None
        for namespace, binding, enabled, _ in screen.active_bindings.values():
            if not binding.show or (own is not None and namespace not in own):
                continue
            compact = binding.group is not None and binding.group.compact
            name = binding.group if compact else binding.action
            display = binding.key_display or self.app.get_key_display(binding)
            if name in seen:  # one hint per action or compact group (an action's first key)
                index = seen[name]
                key, shown, description, on, group, kept = hints[index]
                if compact and display not in shown:
                    hints[index] = (key, shown + display, description, on or enabled, group, kept)
                continue
            seen[name] = len(hints)
            description = binding.group.description if compact else binding.description
            group = binding.group.description if binding.group else ""
            hints.append((binding.key, display, description, enabled, group,
                          binding.action in self._keep))
        lead = [h for h in hints if h[4] in self._first]
        shown = tuple(h[:4] + h[5:] for h in lead + [h for h in hints if h[4] not in self._first])
        if shown != self._shown:
            self._shown = shown
            self._draw()

    def lead(self, first: tuple[str, ...]) -> None:
        """Let other groups' hints lead (a finished session: restart and prompt first)."""
        if first != self._first:
            self._first = first
            self._bindings_changed(self.screen)

    def cover(self, covered: bool) -> None:
        """Another screen came over this one (True) or went (False)."""
        if covered != self._covered:
            self._covered = covered
            self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self._covered:
            hint = Text.assemble((" esc", "bold"), " back ")
            self._spans = [(0, hint.cell_len, "escape")]
            self.update(hint, layout=False)
            return
        # Before its first layout (the first frame) the bar has no width yet: it spans the
        # screen's (drawn unfitted, the first frame cut the last hint: `q quit  b`).
        width = self.content_size.width or self.screen.size.width
        palette = Text.assemble((f" {PALETTE[1]}", "bold"), f" {PALETTE[2]} ")
        hints = [(key, kept, Text.assemble((f" {display}", "bold" + ("" if enabled else " dim")),
                                           (f" {description} ", "" if enabled else "dim")))
                 for key, display, description, enabled, kept in self._shown]
        room = width - sum(hint.cell_len for _, kept, hint in hints if kept) if width else 0
        text, spans = Text(no_wrap=True, overflow="crop"), []
        for key, kept, hint in hints:
            fits = text.cell_len + hint.cell_len <= width and (kept or hint.cell_len <= room)
            if width and not fits:
                continue  # left out whole; a shorter one later may still fit
            room -= 0 if kept else hint.cell_len
            spans.append((text.cell_len, text.cell_len + hint.cell_len, key))
            text.append_text(hint)
        if width and text.cell_len + palette.cell_len <= width:
            spans.append((width - palette.cell_len, width, PALETTE[0]))
            text.append(" " * (width - text.cell_len - palette.cell_len))
            text.append_text(palette)
        self._spans = spans
        self.update(text, layout=False)

    def on_click(self, event: events.Click) -> None:
        for start, end, key in self._spans:
            if start <= event.x < end:
                self.app.simulate_key(key)
                return
