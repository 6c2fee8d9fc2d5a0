"""The files DebuggerApp writes from the screen: x exports the round on screen (JSON, + NPZ
when on) on a worker thread, so a slow or full disk never holds the UI thread; the palette's
Screenshot goes to the same session directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from textual import work
from textual.message import Message

from ..engine.records import RoundRecord, SessionInfo


class ExportDone(Message):
    def __init__(self, paths: list[Path], record: RoundRecord, note: str = "",
                 error: Optional[str] = None) -> None:
        super().__init__()
        self.paths, self.record, self.note, self.error = paths, record, note, error


class ExportActions:
    """A part of DebuggerApp (a mixin): the session's directory, the NPZ switch and the round
    on screen are the app's. Place it before App in the bases: its deliver_screenshot
    replaces App's."""

    def action_export(self) -> None:
        self.export_record(self.record)

    def export_record(self, record: Optional[RoundRecord]) -> None:
        """Write `record` on a worker (the live app's x may name one the engine answered
        with: the record the steps typed before it led to)."""
        if record is None:
            self.notify("nothing to export yet: step a stage first", severity="warning")
            return
        try:
            directory, stem = self.session_dir.path, self.session_dir.round_stem(record.round)
        except OSError as error:
            self._export_failed(record, error)
            return
        self._export(record, self.info, self.npz, directory, stem)
        self.update_status_right()
        self.set_status("busy", f"exporting round {record.round} ({record.stage})…")

    @work(thread=True, group="export", exit_on_error=False)
    def _export(self, record: RoundRecord, info: Optional[SessionInfo], npz: bool,
                directory: Path, stem: str) -> None:
        # Disk I/O only (no MLX): a worker keeps a slow or full disk off the UI thread.
        from ..snapshot import export_round

        try:
            paths = export_round(directory, record, info, npz=npz, stem=stem)
        except OSError as error:
            self.call_from_thread(self._export_failed, record, error)
            return
        self.post_message(ExportDone(paths, record, note=raw_note(record, npz)))

    def _export_failed(self, record: RoundRecord, error: OSError) -> None:
        reason = error.strerror or str(error)
        self.post_message(ExportDone([], record, error=f"export failed: {error.filename or self.export_dir}: {reason}"))

    def on_export_done(self, message: ExportDone) -> None:
        record = message.record
        if message.error:
            self.set_status("error", message.error)
            self.notify(message.error, severity="error", timeout=8)
            return
        # what tells one export from the next (the file name: round-0012-2.json) first
        first = message.paths[0]
        names = first.name + "".join(f" + {p.suffix}" if p.stem == first.stem else f" + {p.name}"
                                     for p in message.paths[1:])
        self.set_status("info", f"exported {names} · round {record.round} {record.stage}"
                        + (f" · {message.note}" if message.note else "") + f" → {first.parent}/")
        if message.note:
            self.notify(message.note, severity="warning", timeout=8)

    def deliver_screenshot(self, filename: Optional[str] = None, path: Optional[str] = None,
                           time_format: Optional[str] = None) -> Optional[str]:
        """The palette's Screenshot: into this session's directory (Textual's default is
        ~/Downloads, which may not exist)."""
        if path is None:
            try:
                path = str(self.session_dir.path)
            except OSError as error:
                self.notify(f"screenshot: {self.export_dir}: {error.strerror or error}", severity="error")
                return None
            self.update_status_right()
        return super().deliver_screenshot(filename, path, time_format)


def raw_note(record: RoundRecord, npz: bool) -> str:
    """Says when the NPZ holds fewer stages than the round probed (NPZ turned on mid-round),
    or none at all."""
    if not npz:
        return ""
    if not record.raw:
        return "no raw buffers in this round (NPZ keeps them from the stage after turning it on)"
    probed = {p.stage for p in record.probes}
    kept = {key.split("/", 1)[0] for key in record.raw}
    missing = [s.stage for s in record.stages if s.stage in probed - kept]
    if missing:
        return f"partial NPZ: no raw buffers for {', '.join(missing)} (NPZ was turned on mid-round)"
    return ""
