"""The Textual app over the engine: `dflash-tui MODEL_DIR` and `dflash-tui replay FILE`.

Nothing is imported here, so the pure modules (rounds, replay) can be used
without pulling in Textual or the engine.
"""
