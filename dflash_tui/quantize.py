"""`dflash-tui quantize DRAFT_DIR --bits B [--group-size G] [--keep NAMES] --out DIR`.

Writes a copy of a float drafter quantized with MLX's own `nn.quantize`, in mlx-lm's
convention (engine/quantize.py), which every command then opens like a float drafter.
Modules whose input width does not split into groups of G stay float, as mlx-lm leaves
them; `--keep` leaves more. The source and the settings are recorded in config.json under
"dflash_tui_quantize". OUT is written whole or not at all (a temp folder beside it,
renamed into place).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import uuid
from pathlib import Path

from .engine.draft_config import QUANT_BITS, QUANT_GROUP_SIZES
from .engine.errors import InputError

RECORD = "dflash_tui_quantize"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("draft", metavar="DRAFT_DIR", help="a float drafter (config.json + *.safetensors)")
    p.add_argument("--bits", type=int, required=True, choices=QUANT_BITS, metavar="B",
                   help=f"bits per weight: {', '.join(map(str, QUANT_BITS))}")
    p.add_argument("--group-size", type=int, default=64, choices=QUANT_GROUP_SIZES, metavar="G",
                   help=f"weights sharing one scale and bias: {', '.join(map(str, QUANT_GROUP_SIZES))} "
                        "(default 64)")
    p.add_argument("--keep", default=None, metavar="NAMES",
                   help="comma-separated modules to leave in float, e.g. selector,fc "
                        "(a module path or any dotted part of one: layers.0, mlp, down_proj, "
                        "kernel_projection, predecessor_codebook)")
    p.add_argument("--out", required=True, metavar="DIR", help="where the quantized drafter goes (new or empty)")


def keep_names(text) -> tuple[str, ...]:
    """--keep NAMES; left out, nothing kept. Given, every name must be there: `--keep ""`
    is refused like `--keep ,` (both name no module)."""
    if text is None:
        return ()
    names = tuple(name.strip() for name in text.split(","))
    if any(not name for name in names):
        raise InputError(f"--keep {text!r}: expected comma-separated module names with none empty")
    return tuple(dict.fromkeys(names))  # a name given twice is kept once, and recorded once


def check_out(out: Path, source: Path) -> None:
    """OUT must be a new path or an empty folder: nothing there is overwritten."""
    if out.resolve() == source.resolve():
        raise InputError(f"--out {out}: that is DRAFT_DIR itself; give a new folder")
    if out.is_dir():
        if any(out.iterdir()):
            raise InputError(f"--out {out}: folder is not empty; give a new or empty folder")
    elif out.exists():
        raise InputError(f"--out {out}: is a file; expected a folder (new or empty)")
    elif not out.parent.is_dir():
        raise InputError(f"--out {out}: parent folder {out.parent} does not exist")


def write_whole(out: Path, write) -> None:
    """`write(folder)` into a temp folder beside OUT, then one rename: OUT is complete or
    absent, never half written (a full disk or ctrl-c leaves nothing behind)."""
    tmp = out.parent / f".{out.name}-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()  # with the umask's permissions, which the rename keeps
    except OSError as error:
        raise InputError(f"--out {out}: cannot write there ({error.strerror or error})") from None
    try:
        write(tmp)
        tmp.rename(out)  # onto a new path or an empty folder
    except OSError as error:
        shutil.rmtree(tmp, ignore_errors=True)
        raise InputError(f"--out {out}: writing failed ({error.strerror or error}); nothing was written") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def run(args) -> int:
    import mlx.core as mx

    from .engine.checkpoint import load_drafter, save_drafter
    from .engine.quantize import describe, float_paths, quantize_drafter

    source, out = Path(args.draft).expanduser(), Path(args.out).expanduser()
    keep = keep_names(args.keep)
    check_out(out, source)
    model = load_drafter(source, dtype=None)  # quantize the weights as stored
    quantize_drafter(model, args.bits, args.group_size, keep, where=str(source))
    record = {
        "tool": "dflash-tui quantize", "source": str(source.resolve()), "bits": args.bits,
        "group_size": args.group_size, "mode": "affine", "keep": list(keep),
        "float": float_paths(model), "mlx": mx.__version__,
    }
    write_whole(out, lambda tmp: save_drafter(model, tmp, metadata={RECORD: record}))
    before = sum(f.stat().st_size for f in source.glob("*.safetensors"))
    after = sum(f.stat().st_size for f in out.glob("*.safetensors"))
    print(f"{out}: {model.config.kind_label} drafter {describe(model)}; weights "
          f"{before / 1e6:.1f} MB -> {after / 1e6:.1f} MB", file=sys.stderr)
    return 0
