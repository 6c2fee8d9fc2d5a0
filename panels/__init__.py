"""Textual widgets that render engine records (installed as dflash_tui.panels).

One widget per module. A panel is handed plain records (dflash_tui.engine.records) and
renders them; it never talks to the engine and never imports MLX.
"""
