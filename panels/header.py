"""Header: who is talking to whom (model, drafter, dtype, backend) and the run's numbers.
Where the line has room, the identity also says what the drafter is fed: the target layers it
reads (after --layer-offset) and its mask token (`reads 1,8,14,20,27 mask 16 <empty_output>`);
the message log keeps the same from the session's start (`session_setup`).

Looking at an earlier round of a live session, the second line starts with a mark saying so
and where the session is. A γ beyond what the drafter was trained for is marked where γ is
shown.
"""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from dflash_tui.engine.records import SessionInfo

from .format import DASH, short_path, token_cell
from .frame import Frame

MASK_TEXT_WIDTH = 16  # characters of the mask token's text the header shows


class HeaderPanel(Static):
    DEFAULT_CSS = """
    HeaderPanel {
        height: 2;
        padding: 0 1;
        background: $panel;
        color: $foreground;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(Text("dflash-tui", style="bold"), **kwargs)
        self._counted: tuple = ((), (None, None, 0))  # (history key, its numbers)
        self._shown: Optional[Text] = None
        self._frame: Optional[Frame] = None

    def on_resize(self) -> None:
        if self._frame is not None:  # the identity is fitted to the width
            self.show(self._frame)

    def show(self, frame: Frame) -> None:
        self._frame = frame
        width = self.content_size.width
        identity = self._identity(frame, setup=True)
        if identity.cell_len > width > 0:
            # Narrower: the target layers read and the mask token go first (the message log,
            # `L`, has them from the session's start), then the target's shape, then the
            # drafter's but its block, then what a quantized drafter left float (`q8/g64,
            # float: codebooks` -> `q8/g64`), then the block, so that the dtype and backend
            # stay whole (a long model name cut them to `float…`).
            identity = self._identity(frame)
        if identity.cell_len > width > 0:
            for drafter_shape, kept_float in (("whole", True), ("block", True), ("block", False),
                                              ("none", False)):
                identity = self._identity(frame, target_shape=False, drafter_shape=drafter_shape,
                                          kept_float=kept_float)
                if identity.cell_len <= width:
                    break
        text = Text("\n").join([identity, self._numbers(frame, width)])
        if text == self._shown:
            # Unchanged (a tab switch, a slot move): a redraw would widen the screen area the
            # next frame repaints from the inspector to every column.
            return
        self._shown = text
        # fixed height: no layout pass (which would repaint every panel) for new numbers
        self.update(text, layout=False)

    def _identity(self, frame: Frame, target_shape: bool = True, drafter_shape: str = "whole",
                  setup: bool = False, kept_float: bool = True) -> Text:
        text = Text()
        text.append("dflash-tui", style="bold")
        if frame.mode == "replay":
            text.append(" replay", style="bold magenta")
        info = frame.info
        if info is None and frame.failed:  # said, or the header would wait for it forever
            text.append("  load failed: no session", style="bold red")
            return text
        if info is None:
            text.append("  loading…", style="italic")
            return text
        text.append("  ")
        text.append(short_path(info.target_path, strip_suffix=info.target_path.endswith(".gguf")),
                    style="bold cyan")
        if target_shape:
            text.append(f" {info.target_kind} {info.target_layers}L H{info.target_hidden} "
                        f"V{info.vocab_size}", style="cyan")
        text.append("  ◂ ")
        text.append(f"{info.drafter_kind}", style="bold green")
        top_k = f" K{info.top_k}" if info.top_k else ""
        block = f" block {info.block_size}"
        shape = {"whole": f" {info.drafter_layers}L H{info.drafter_hidden}{top_k}{block}",
                 "block": block, "none": ""}[drafter_shape]
        text.append(shape, style="green")
        if info.drafter_quantization:  # e.g. "q4/g64": the values its weights were packed to
            label = info.drafter_quantization if kept_float else \
                info.drafter_quantization.split(", float:")[0]
            text.append(f" {label}", style="bold yellow")
        if info.layer_offset:  # --layer-offset: the drafter reads other layers than it names
            text.append(f" layers{info.layer_offset:+d}", style="bold yellow")
        if setup:  # what the drafter is fed: the target layers it reads, its mask token
            text.append(f" reads {','.join(map(str, info.target_layer_ids))} "
                        f"mask {mask_token(info)}", style="green")
        text.append(f"  {info.dtype} · {info.backend}", style="yellow")
        group = info.distributed
        if group is not None:
            text.append(f" · {group.backend} ×{group.world_size} {group.sharding}: "
                        f"{group.per_rank}", style="yellow")
        if info.temperature > 0:
            text.append(f" · T={info.temperature:g}", style="yellow")
        return text

    def _numbers(self, frame: Frame, width: int = 0) -> Text:
        """The run's numbers, each field whole: where they pass `width`, fields are left out
        whole, the least needed first (comm, tok/s, tokens, mean acc): the round, γ and the
        stage are what a step changes (an ellipsis had cut `tok/s 14.3` to `to…` and the
        stage to `stage …`)."""
        record = frame.record
        fields: list[tuple[int, Text]] = []  # (how soon it is left out: higher first, field)

        def field(label: str, value: str, style: str = "bold", drop: int = 0) -> None:
            fields.append((drop, Text.assemble((f"{label} ", "dim"), (value, style), "  ")))

        if frame.live:
            mark = f" ◀ past · live: {frame.live} · end "
            fields.append((0, Text.assemble((mark, "bold black on magenta"), " ")))
        field("round", frame.round_label or (str(record.round) if record else DASH))
        field("pos", str(record.position) if record else
              (str(frame.prefill.state.anchor_position) if frame.prefill else DASH))
        fields.append((0, self._gamma(frame)))
        if frame.other is not None:
            field("vs", frame.other_label, style="bold magenta", drop=1)
        mean, rate, generated = self._count(frame)
        field("mean acc", DASH if mean is None else f"{mean:.2f}", drop=2)
        if frame.show_timings:
            field("tok/s", DASH if rate is None else f"{rate:.1f}", drop=4)
        else:
            field("tok/s", "·", style="dim", drop=4)
        field("tokens", str(_tokens(frame, generated)), drop=3)
        if record is not None and record.stage is not None:
            field("stage", record.stage, style="bold magenta")
        timed = record if record is not None and record.comm is not None else None
        if timed is not None and frame.show_timings:
            # Distributed: the round's communication, of its whole time (the stages hold the
            # target's all_sums; the lockstep check and the commands come on top).
            comm = timed.comm
            whole = sum(timed.timings_ms.values()) + comm.lockstep_ms + comm.commands_ms
            field("comm", f"{comm.total_ms:.0f} of {whole:.0f} ms", drop=5)

        def cells(kept: list[tuple[int, Text]]) -> int:
            return sum(part.cell_len for _, part in kept) - 2  # the last field's gap

        while width > 0 and len(fields) > 1 and cells(fields) > width:
            most = max(drop for drop, _ in fields)
            fields.pop(max(i for i, (drop, _) in enumerate(fields) if drop == most))
        text = Text().join(part for _, part in fields)
        text.rstrip()  # the last field's gap: past the edge, Textual would cut the line before it
        return text

    def _count(self, frame: Frame) -> tuple:
        """(mean accepted, tokens/s, generated tokens) up to the round on screen, counted
        again only when that changes."""
        key = (id(frame.history), len(frame.history or ()), frame.upto)
        if key != self._counted[0]:
            numbers = (None, None, 0)
            if frame.history is not None and frame.upto:
                from dflash_tui import aggregates

                history, span = frame.history, aggregates.every_round(frame.history, frame.upto)
                numbers = (aggregates.mean_accepted(history, span),
                           aggregates.tokens_per_second(history, span),
                           aggregates.generated_tokens(history, span))
            self._counted = (key, numbers)
        return self._counted[1]

    @staticmethod
    def _gamma(frame: Frame) -> Text:
        text = Text()
        record, trained = frame.record, frame.trained_gamma
        shown = [frame.gamma]
        if frame.gamma_next is not None and record is not None and frame.gamma_next != record.gamma:
            shown.append(frame.gamma_next)
        text.append("γ ", style="dim")
        for i, gamma in enumerate(shown):
            beyond = gamma is not None and trained is not None and gamma > trained
            # "5→14" as one span where the styles agree: it reaches the terminal unbroken.
            text.append(("→" if i else "") + (DASH if gamma is None else str(gamma)),
                        style="bold black on yellow" if beyond else "bold")
        if any(g is not None and trained is not None and g > trained for g in shown):
            text.append(f" >{trained} trained", style="yellow")
        if _capped_by_max_tokens(frame):  # fewer than the γ set: the tokens left
            text.append(" capped", style="dim")
        text.append("  ")
        return text


def mask_token(info: SessionInfo) -> str:
    """`16 <empty_output>`: the id the drafter's block is filled with, and its text (a
    recording made before the text was kept: the id alone)."""
    if info.mask_token_text is None:
        return str(info.mask_token_id)
    return f"{info.mask_token_id} {token_cell(info.mask_token_text, MASK_TEXT_WIDTH)}"


def session_setup(info: SessionInfo) -> str:
    """The session's setup in one line, for the message log (`L`) when it opens: what the
    header's wide form shows of it, spelled out."""
    layers = ", ".join(map(str, info.target_layer_ids))
    offset = (f" (config.json's shifted by --layer-offset {info.layer_offset:+d})"
              if info.layer_offset else "")
    # a quantized drafter's whole packing: a narrow header keeps its first part alone
    packing = f"; weights {info.drafter_quantization}" if info.drafter_quantization else ""
    return (f"session: {info.drafter_kind} drafter reads target layers {layers}{offset} of "
            f"{info.target_layers}; mask token {mask_token(info)}; block {info.block_size}"
            f"{packing}; {info.dtype} on {info.backend}")


def _tokens(frame: Frame, generated: int) -> int:
    """Tokens generated up to the round on screen. From its position where there is one: a
    recording of some rounds only (a folder of snapshots) lacks the others' commits, which
    the history's sum would leave out; else the history's commits and the prefill's token."""
    record, info = frame.record, frame.info
    if record is not None and info is not None:
        return record.position + 1 - info.prompt_tokens + len(record.committed_tokens)
    return generated + (1 if frame.prefill or generated else 0)


def _capped_by_max_tokens(frame: Frame) -> bool:
    """The round proposes fewer than the γ set because only that many tokens are left
    before --max-tokens (the engine's budget: max_tokens - tokens generated before it)."""
    record, info = frame.record, frame.info
    if record is None or info is None or frame.gamma_next is None or record.gamma >= frame.gamma_next:
        return False
    generated_before = record.position + 1 - info.prompt_tokens
    return record.gamma == info.max_tokens - generated_before
