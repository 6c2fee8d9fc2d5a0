"""Header: who is talking to whom (model, drafter, dtype, backend) and the run's numbers."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from . import stats
from .format import DASH, short_path
from .frame import Frame


class HeaderPanel(Static):
    DEFAULT_CSS = """
    HeaderPanel {
        height: 2;
        padding: 0 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(Text("dflash-tui", style="bold"), **kwargs)

    def show(self, frame: Frame) -> None:
        lines = [self._identity(frame), self._numbers(frame)]
        # fixed height: no layout pass (which would repaint every panel) for new numbers
        self.update(Text("\n", no_wrap=True, overflow="ellipsis").join(lines), layout=False)

    def _identity(self, frame: Frame) -> Text:
        text = Text()
        text.append("dflash-tui", style="bold")
        if frame.mode == "replay":
            text.append(" replay", style="bold magenta")
        info = frame.info
        if info is None:
            text.append("  loading…", style="italic")
            return text
        text.append("  ")
        text.append(short_path(info.target_path, strip_suffix=info.target_path.endswith(".gguf")),
                    style="bold cyan")
        text.append(f" {info.target_kind} {info.target_layers}L H{info.target_hidden} "
                    f"V{info.vocab_size}", style="cyan")
        text.append("  ◂ ")
        text.append(f"{info.drafter_kind}", style="bold green")
        top_k = f" K{info.top_k}" if info.top_k else ""
        text.append(f" {info.drafter_layers}L H{info.drafter_hidden}{top_k} "
                    f"block {info.block_size}", style="green")
        text.append(f"  {info.dtype} · {info.backend}", style="yellow")
        group = info.distributed
        if group is not None:
            text.append(f" · {group.backend} ×{group.world_size} {group.sharding}: "
                        f"{group.per_rank}", style="yellow")
        if info.temperature > 0:
            text.append(f" · T={info.temperature:g}", style="yellow")
        return text

    def _numbers(self, frame: Frame) -> Text:
        record = frame.record
        text = Text()

        def field(label: str, value: str, style: str = "bold") -> None:
            text.append(f"{label} ", style="dim")
            text.append(value, style=style)
            text.append("  ")

        field("round", frame.round_label or (str(record.round) if record else DASH))
        field("pos", str(record.position) if record else
              (str(frame.prefill.state.anchor_position) if frame.prefill else DASH))
        gamma = str(frame.gamma) if frame.gamma is not None else DASH
        if frame.gamma_next is not None and record is not None and frame.gamma_next != record.gamma:
            gamma += f"→{frame.gamma_next}"
        field("γ", gamma)
        mean = stats.mean_accepted(frame.rounds)
        field("mean acc", DASH if mean is None else f"{mean:.2f}")
        if frame.show_timings:
            rate = stats.tokens_per_second(frame.rounds)
            field("tok/s", DASH if rate is None else f"{rate:.1f}")
        else:
            field("tok/s", "·", style="dim")
        field("tokens", str(stats.generated_tokens(frame.rounds)
                            + (1 if frame.prefill or frame.rounds else 0)))
        if record is not None and record.stage is not None:
            field("stage", record.stage, style="bold magenta")
        timed = next((r for r in reversed(frame.rounds) if r.comm is not None), None)
        if timed is not None and frame.show_timings:
            # Distributed: the last round's communication, of its whole time (the stages hold
            # the target's all_sums; the lockstep check and the commands come on top).
            comm = timed.comm
            whole = sum(timed.timings_ms.values()) + comm.lockstep_ms + comm.commands_ms
            field("comm", f"{comm.total_ms:.0f} of {whole:.0f} ms")
        return text
