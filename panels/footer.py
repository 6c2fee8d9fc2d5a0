"""The footer of keys, rebuilt only when the keys it shows change.

Textual's Footer recomposes (mounts and styles a widget per key) whenever the active
bindings change, and they change with every focus move, e.g. on switching inspector tabs,
even though the keys shown stay the same. On a small CPU that rebuild is the slowest part
of answering such a key; here it happens only when the shown keys really differ.
"""

from __future__ import annotations

from textual.widgets import Footer


class KeysFooter(Footer):
    _shown: tuple = ()

    def bindings_changed(self, screen) -> None:
        self._bindings_ready = True  # what Footer.bindings_changed sets (textual is pinned)
        if not screen.app.app_focus or not self.is_attached or screen is not self.screen:
            return
        shown = tuple((binding.key, binding.description, enabled)
                      for _, binding, enabled, _ in screen.active_bindings.values() if binding.show)
        if shown != self._shown:
            self._shown = shown
            self.call_after_refresh(self.recompose)
