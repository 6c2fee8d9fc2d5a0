"""Loading a target and its drafter once, then opening sessions on them: the one entry point
the CLI, the app, the bench and the trainer share.

    pair = load_pair("MODEL_DIR", dtype="bfloat16")
    session = pair.open("Write a haiku", options=SessionOptions(gamma=7))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

from .checkpoint import load_drafter
from .compare import Reference, load_reference
from .compare_spec import DEFAULT_TOLERANCE, CompareSpec, check_tolerance, parse_spec
from .drafter import DraftModel
from .errors import InputError, ParameterError
from .paths import check_target_path, named_as_draft, resolve_drafter_dir
from .quantize import dequantize_for_cpu, describe as describe_quantization, packing
from .session import Session, SessionOptions
from .target import DTYPES, Target, backend, encode_prompt, load_target

if TYPE_CHECKING:
    from .distributed import Mesh

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class Pair:
    """A loaded target and the drafter that proposes for it. Sessions opened on it share both
    (each session's prefill starts the target's cache afresh), one session at a time."""

    target: Target
    drafter: DraftModel
    draft_dir: Path
    mesh: Optional["Mesh"] = None  # the group the target is sharded over (engine/distributed.py)
    reference: Optional[Reference] = None  # --compare: run beside the drafter every round
    # `draft` as load_pair was given it (None: the default MODEL_DIR/draft): a session's
    # refusal of the drafter for this target names it as the loader's do (`--draft DIR: ...`)
    draft: Optional[str | Path] = None

    @property
    def dtype(self) -> str:
        """The drafter's float dtype, read from its weights (a norm: never quantized)."""
        return str(self.drafter.norm.weight.dtype).removeprefix("mlx.core.")

    def describe(self) -> str:
        """What runs, before any session: `DFlash2 drafter (8 layers, q8/g64) on llama target
        (30 layers), float32 on cpu` (probe and bench print it); a target kept quantized says
        so (`30 layers, kept q4/g32+q8/g32`), since the float type then names only its norms."""
        config = self.drafter.config
        packed = describe_quantization(self.drafter)
        kept = packing(self.target.model)
        return (f"{config.kind_label} drafter ({config.num_hidden_layers} layers"
                f"{', ' + packed if packed else ''}) on {self.target.spec.kind} target "
                f"({self.target.num_layers} layers{', kept ' + kept if kept else ''}), "
                f"{self.dtype} on {backend()}")

    def open(self, prompt: str, *, options: SessionOptions = SessionOptions(),
             chat: Optional[bool] = None, progress: Progress = _quiet,
             prefill: bool = True, source: Optional[str] = None) -> Session:
        """A session on `prompt` (through the chat template when `chat`, by default when the
        tokenizer has one), prefilled unless `prefill=False`. `source`: where the prompt came
        from, named in a refusal (`--prompt-file F`)."""
        ids = encode_prompt(self.target.tokenizer, prompt, chat)
        self.target.check_prompt(ids, source)
        if self.mesh is None:
            session = Session(self, ids, options=options, prompt_text=prompt)
        else:  # every rank steps it; the ranks check they agree (engine/lockstep.py)
            from .lockstep import LockstepSession

            session = LockstepSession(self, ids, options=options, prompt_text=prompt)
        if prefill:
            progress(f"prefill: {len(ids)} prompt tokens")
            session.prefill()
        return session


def load_pair(model: str | Path, draft: Optional[str | Path] = None, *, dtype: str = "float32",
              keep_quantized: bool = False, progress: Progress = _quiet,
              mesh: Optional["Mesh"] = None, compare: Optional[str | CompareSpec] = None,
              compare_tol: Optional[float] = None, fuse: Optional[bool] = None) -> Pair:
    """Load the target at `model` (an mlx-lm directory or a .gguf file) and its drafter
    (`draft`, default `model/draft`), both cast to `dtype`; on the CPU a quantized drafter
    is dequantized, as a small quantized target is, unless `keep_quantized`. With `mesh`
    (a joined group, engine/distributed.py) the target is sharded over its ranks and the
    drafter loaded whole on each. With `compare` (a SPEC, engine/compare_spec.py), the
    reference drafter every session runs beside it, whose buffers diverge beyond a relative
    error of `compare_tol` (default 0.01). `fuse`: the target's projections fused
    (engine/target.py, load_target; default on a GPU)."""
    model = Path(model).expanduser()
    if dtype not in DTYPES:
        raise ParameterError("dtype", dtype, f"expected one of {', '.join(DTYPES)}")
    if isinstance(compare, str):
        compare = parse_spec(compare)
    if compare is not None:
        compare_tol = check_tolerance(DEFAULT_TOLERANCE if compare_tol is None else compare_tol)
        if mesh is not None:
            raise ParameterError("compare", compare.text,
                                 "not with a target sharded over ranks (--distributed)")
    check_target_path(model)
    draft_dir = resolve_drafter_dir(model, draft)
    if mesh is None:
        progress(f"loading target {model}")
        target = load_target(model, dtype, keep_quantized=keep_quantized, fuse=fuse)
    else:
        progress(f"loading target {model}, sharded over {mesh.size} ranks ({mesh.backend})")
        target = load_target(model, dtype, keep_quantized=keep_quantized, shard=mesh.shard,
                             fuse=fuse)
        mesh.adopt(target)
    progress(f"loading drafter {draft_dir}")
    with named_as_draft(draft):
        drafter = load_drafter(draft_dir, DTYPES[dtype])
    if not keep_quantized:
        dequantize_for_cpu(drafter)
    reference = None
    if compare is not None:
        progress(f"loading the reference configuration ({compare.text})")
        reference = load_reference(compare, drafter, draft_dir, dtype, compare_tol,
                                   keep_quantized)
    return Pair(target, drafter, draft_dir, mesh, reference, draft)


__all__ = ["InputError", "Pair", "Progress", "load_pair", "resolve_drafter_dir"]
