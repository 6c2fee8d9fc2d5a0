"""`--distributed`: the target sharded over ranks that `mlx.launch` starts (docs/DISTRIBUTED.md).

The group tests launch two real ranks on this machine with the ring backend (MLX's CPU build
has it) and hold them to the same decode in one process (the first of them runs in the inner
loop; the others, which launch groups too, are marked slow): the same committed tokens, the same
accepted length and rollback every round, the same probe statistics within float tolerance.
The refusals are checked on real checkpoints, and a rank killed mid-run must end the run on
every rank with a line naming the rank, not leave the others waiting.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import mlx.core as mx
import numpy as np
import pytest
from fixtures import write_mlx_lm_target

from dflash_tui.cli import main
from dflash_tui.engine.distributed import AGREE_MARK, Mesh, check_agreement, launched, refuse_split
from dflash_tui.engine.errors import GroupError, InputError
from dflash_tui.engine.target import load_target

BIN = Path(sys.executable).parent
CHILD = Path(__file__).parent / "lockstep_child.py"
HANG_GUARD_S = 300  # a launch that has not ended by then is a hang (never a timing check)
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _free_ports() -> int:
    """A starting port with the next one free too (ring ranks listen on port, port + 1):
    other test runs on this machine may be launching groups at the same time."""
    for _ in range(50):
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
        return port
    raise RuntimeError("no two consecutive free ports")


def _launch_argv(command: list[str], ranks: int = 2) -> list[str]:
    return [str(BIN / "mlx.launch"), "-n", str(ranks), "--backend", "ring",
            "--starting-port", str(_free_ports()), "--", *command]


def _launch(command: list[str], cwd: Path, ranks: int = 2) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_")}
    return subprocess.run(_launch_argv(command, ranks), cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def _close(a: dict, b: dict) -> list:
    """Probe rows whose statistics differ beyond float tolerance (sums in another order)."""
    bad = []
    for x, y in zip(a["probes"], b["probes"]):
        if x[:3] != y[:3] or not np.allclose(
                np.array(x[3:], dtype=float), np.array(y[3:], dtype=float), rtol=1e-3, atol=1e-5):
            bad.append((x, y))
    return bad


# ---- the environment a launcher leaves ----------------------------------------------------------

def test_launched_reads_the_launchers_environment(tmp_path):
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([["127.0.0.1:5000"], ["127.0.0.1:5001"], ["127.0.0.1:5002"]]))
    empty = tmp_path / "empty"
    empty.write_text("")
    assert launched({}) is None
    assert launched({"MLX_RANK": "1", "MLX_HOSTFILE": str(hosts)}) == ("ring", 3)
    assert launched({"MLX_RANK": "0", "MLX_HOSTFILE": str(empty)}) == ("ring", 1)  # -n 1
    assert launched({"MLX_RANK": "0", "MLX_WORLD_SIZE": "2", "NCCL_HOST_IP": "h"}) == ("nccl", 2)
    assert launched({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "2"}) == ("mpi", 4)


# ---- refusals --------------------------------------------------------------------------------------

def test_distributed_without_a_launched_group_is_refused(make_pair, monkeypatch, capsys):
    target, _ = make_pair("llama")
    for name in ("MLX_RANK", "MLX_HOSTFILE", "MLX_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(name, raising=False)
    code = main(["probe", str(target), "--distributed"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("dflash-tui: error: --distributed: no launched group")
    assert "mlx.launch -n N" in err[0]


def test_world_sizes_that_do_not_divide_the_heads_are_refused(make_pair, sample_gguf):
    llama = json.loads((make_pair("llama")[0] / "config.json").read_text())
    refuse_split(llama, 2, "t")  # 4 heads, 2 kv heads (so not 4 ranks: llama splits kv heads)
    with pytest.raises(InputError, match=r"t: 3 ranks cannot split the 4 attention heads "
                                         r"\(num_attention_heads\).*can, up to 16: 1, 2\)"):
        refuse_split(llama, 3, "t")
    qwen = json.loads((make_pair("qwen35")[0] / "config.json").read_text())
    refuse_split(qwen, 2, "t")
    # mlx-lm's qwen3_5 copies kv heads for more ranks than it has (4 ranks, 2 kv heads), but
    # splits the gated DeltaNet's 2 key heads all the same.
    with pytest.raises(InputError, match="4 ranks cannot split the 2 linear-attention key heads"):
        refuse_split(qwen, 4, "t")
    # The real sample, SmolLM2-135M: 9 heads and 3 kv heads, read from the GGUF itself.
    from dflash_tui.engine.gguf import llama_config, read_gguf

    smollm = llama_config(sample_gguf, read_gguf(sample_gguf)[1])
    with pytest.raises(InputError, match=r"2 ranks cannot split the 9 attention heads.*: 1, 3\)"):
        refuse_split(smollm, 2, str(sample_gguf))
    refuse_split(smollm, 3, str(sample_gguf))


UNSHARDABLE = {
    "gemma": {"model_type": "gemma", "hidden_size": 64, "num_hidden_layers": 2,
              "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
              "head_dim": 16, "rms_norm_eps": 1e-6},
    "qwen3_next": {"model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 2,
                   "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
                   "head_dim": 16, "linear_num_value_heads": 4, "linear_num_key_heads": 2,
                   "linear_key_head_dim": 16, "linear_value_head_dim": 16,
                   "linear_conv_kernel_dim": 4, "num_experts": 2, "num_experts_per_tok": 1,
                   "decoder_sparse_step": 1, "shared_expert_intermediate_size": 64,
                   "mlp_only_layers": [], "moe_intermediate_size": 64, "rms_norm_eps": 1e-6,
                   "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                   "max_position_embeddings": 2048},
}


@pytest.mark.parametrize("kind, expected", [
    ("gemma", "mlx-lm cannot shard a gemma model"),
    ("qwen3_next", "mlx-lm can only pipeline a qwen3_next model"),
])
def test_a_target_mlx_lm_cannot_tensor_shard_is_refused(tmp_path, kind, expected):
    target = write_mlx_lm_target(tmp_path / kind, UNSHARDABLE[kind])
    mesh = Mesh(mx.distributed.init(), "ring")  # this process alone: a real group of one
    with pytest.raises(InputError, match=f"{re.escape(str(target))}: {expected}"):
        load_target(target, shard=mesh.shard)


# ---- two ranks against one process ------------------------------------------------------------

def test_two_ranks_decode_exactly_as_one_process(make_pair, tmp_path):
    targets = [make_pair(kind)[0] for kind in ("llama", "qwen35", "qwen35-untied")]
    names = [str(t) for t in targets]
    subprocess.run([sys.executable, str(CHILD), str(tmp_path), "single", *names], check=True,
                   timeout=HANG_GUARD_S)
    done = _launch([sys.executable, str(CHILD), str(tmp_path), "group", *names], tmp_path)
    for target in targets:
        group_file = tmp_path / f"group-{target.name}.json"
        assert group_file.exists(), done.stdout + done.stderr
        one = json.loads((tmp_path / f"single-{target.name}.json").read_text())
        two = json.loads(group_file.read_text())
        assert two["tokens"] == one["tokens"] == one["greedy"], target.name
        assert two["accepted"] == one["accepted"], target.name
        assert two["rollbacks"] == one["rollbacks"], target.name
        assert len(set(one["accepted"])) > 2  # the forced proposals vary what is accepted
        assert len(two["probes"]) == len(one["probes"]) > 0
        assert not _close(one, two), (target.name, _close(one, two)[:3])
        assert two["distributed"]["world_size"] == 2 and two["distributed"]["backend"] == "ring"
        assert two["distributed"]["per_rank"].startswith("heads 2/4, kv heads 1/2, ffn 64/128")
        assert all(c is not None and c["target_collectives"] > 0 for c in two["comm"])
        assert all(c is None for c in one["comm"])
    assert {kind for kind, _ in json.loads(
        (tmp_path / "group-qwen35-target.json").read_text())["rollbacks"]} >= {"replay"}


@pytest.mark.slow
def test_probe_on_two_ranks_prints_and_writes_once_what_one_process_does(make_pair, tmp_path):
    target, _ = make_pair("qwen35")
    probe = ["probe", str(target), "--prompt", "The rain in", "--max-tokens", "6", "--block", "3"]
    single = subprocess.run([str(BIN / "dflash-tui"), *probe, "--out", str(tmp_path / "one")],
                            capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert single.returncode == 0, single.stderr
    group = _launch([str(BIN / "dflash-tui"), *probe, "--out", str(tmp_path / "two"),
                     "--distributed"], tmp_path)
    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    two = json.loads((tmp_path / "two" / "summary.json").read_text())
    assert two["tokens"] == one["tokens"]
    assert two["accepted_per_round"] == one["accepted_per_round"]
    assert two["session"]["distributed"]["world_size"] == 2
    assert "distributed" not in one["session"]
    # Rank 0 alone prints: each round line and the closing line come once.
    rounds = [line for line in group.stdout.splitlines() if line.startswith("round ")]
    assert len(rounds) == one["rounds"], group.stdout + group.stderr
    assert group.stdout.count("--- ") == 1
    assert all(" comm " in line for line in rounds)
    snapshot = json.loads((tmp_path / "two" / "round-0000.json").read_text())
    assert snapshot["comm"]["target_collectives"] > 0


@pytest.mark.slow
def test_ranks_that_disagree_end_with_a_line_naming_the_rank(make_pair, tmp_path):
    """Each rank samples with its own seed (MLX_RANK): their first tokens differ, and the
    check after the prefill says which rank is out of lockstep."""
    target, _ = make_pair("llama")
    script = ("import os, sys; from dflash_tui.cli import main; sys.exit(main(['probe', "
              f"{str(target)!r}, '--temperature', '1', '--max-tokens', '4', '--distributed', "
              "'--seed', os.environ['MLX_RANK']]))")
    done = _launch([sys.executable, "-c", script], tmp_path)
    lines = [l for l in done.stderr.splitlines() if l.startswith("dflash-tui: error:")]
    assert lines, done.stderr
    assert re.match(r"dflash-tui: error: rank [01] of 2: rank 1 is out of lockstep with rank 0 "
                    r"after the prefill: it has rounds 0, tokens \d+, checksum \d+ where rank 0 "
                    r"has rounds 0, tokens \d+, checksum \d+$", lines[0]), lines
    assert "Traceback" not in done.stderr


def test_a_gathered_row_that_never_arrived_is_a_lost_rank_not_a_disagreement():
    facts = {"rounds": 4, "tokens": 93, "checksum": 129661195}
    good = [AGREE_MARK, 4, 93, 129661195]
    check_agreement("after round 3", facts, np.array([good, good]))
    # What a clean-clone CI run once got back from a peer killed mid-exchange: the ring
    # backend logged its socket errors and returned a buffer it never filled.
    garbage = [1023510243, 1008981771, 995049008, 0]
    with pytest.raises(GroupError, match=r"^lost contact with rank 1, which ended or dropped "
                       r"its connection \(its part of the lockstep check after round 3 never came\)$"):
        check_agreement("after round 3", facts, np.array([good, garbage]))
    with pytest.raises(GroupError, match=r"^rank 1 is out of lockstep with rank 0 after round 3: "
                       r"it has rounds 4, tokens 94, checksum 129661195 where rank 0 has rounds 4, "
                       r"tokens 93, checksum 129661195$"):
        check_agreement("after round 3", facts, np.array([good, [AGREE_MARK, 4, 94, 129661195]]))


def _rank_pid(launcher: int, rank: int) -> int:
    """The pid of the launcher's child with MLX_RANK=rank."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if parent == launcher and f"MLX_RANK={rank}".encode() in env:
            return int(entry)
    raise AssertionError(f"no rank {rank} under the launcher")


@pytest.mark.slow
@linux_only
def test_a_rank_that_dies_ends_the_run_on_every_rank(make_pair, tmp_path):
    target, _ = make_pair("llama")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLX_")}
    launcher = subprocess.Popen(
        _launch_argv([str(BIN / "dflash-tui"), "probe", str(target), "--max-tokens", "100000",
                      "--distributed"]),
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(launcher.stderr), daemon=True)
    reader.start()
    try:
        for line in launcher.stdout:
            if line.startswith("round    2"):
                break
        os.kill(_rank_pid(launcher.pid, 1), signal.SIGKILL)
        launcher.stdout.read()
        launcher.wait(timeout=HANG_GUARD_S)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    reader.join(timeout=10)
    text = "".join(stderr)
    assert "Node with rank 1 exited with code -9" in text, text  # mlx.launch names the dead rank
    # Rank 0 says so in one line, unless mlx.launch's SIGTERM reaches it first (a race on a
    # loaded machine): either way the run ends on every rank, without a hang or a traceback.
    assert ("dflash-tui: error: rank 0 of 2: lost contact with rank 1, which ended" in text
            or "Node with rank 0 exited with code 143" in text), text
    assert "Traceback" not in text


# ---- the TUI on two ranks --------------------------------------------------------------------

# The launcher runs in a session of its own with the pty as its controlling terminal, as
# from a shell: rank 0 finds the terminal at /dev/tty (app/launched.py).
AS_SHELL_JOB = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                "os.execv(sys.argv[1], sys.argv[1:])")


def _tui_on_two_ranks(target: Path, tmp_path: Path, *extra: str):
    from pty_terminal import Terminal

    argv = [sys.executable, "-c", AS_SHELL_JOB, *_launch_argv(
        [str(BIN / "dflash-tui"), str(target), "--prompt", "The rain in", "--max-tokens", "6",
         "--distributed", *extra])]
    env_before = dict(os.environ)
    for name in [k for k in os.environ if k.startswith("MLX_")]:
        del os.environ[name]
    try:
        term = Terminal(argv, size=(200, 40), cwd=tmp_path)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    import termios

    return term, termios.tcgetattr(term.master)


@pytest.mark.slow
@linux_only
def test_tui_on_two_ranks_steps_every_rank_and_quits_them_all(make_pair, tmp_path):
    """Every command that changes the session reaches the other rank: a round, γ, raw buffers,
    a restart, a run; quitting ends both; the decode is the single process's."""
    import termios

    target, _ = make_pair("llama")
    trace = tmp_path / "trace.jsonl"
    term, modes = _tui_on_two_ranks(target, tmp_path, "--trace", str(trace))
    try:
        term.when("ring ×2 tensor: heads 2/4, kv heads 1/2, ffn 64/128", timeout=HANG_GUARD_S)
        term.when("ready after prefill", timeout=HANG_GUARD_S)
        term.type("n")  # one round: each stage broadcast, then the ranks compare
        term.when(["round 0 done", "comm "], since=term.mark(), timeout=HANG_GUARD_S)
        start = term.mark()
        term.type("-X")  # γ 15 -> 14 from the next round; keep raw buffers
        term.when("→14", since=start, timeout=HANG_GUARD_S)  # the header: this round's γ→next
        start = term.mark()
        term.type("r")  # a new session on every rank, with γ 14
        term.when("ready after prefill", since=start, timeout=HANG_GUARD_S)
        start = term.mark()
        term.type("c")  # run to --max-tokens
        term.when("finished", since=start, timeout=HANG_GUARD_S)
        assert termios.tcgetattr(term.master)[3] & termios.ECHO == 0  # the app's raw mode
        term.type("q")
        term.process.wait(timeout=HANG_GUARD_S)  # the launcher ends once every rank has
        restored = termios.tcgetattr(term.master)
    finally:
        term.close()
    output = term.text()
    assert "\x1b[?1049l" in output and "error" not in output, output[-2000:]
    assert restored == modes  # rank 0 gave the terminal back as it found it
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    headers = [i for i, line in enumerate(lines) if "prefill" in line]
    assert len(headers) == 2  # the first session and the restart
    restarted = lines[headers[1]:]
    generated = [restarted[0]["prefill"]["first_token"]] + [
        t for line in restarted[1:] for t in line["committed_tokens"]]
    assert main(["probe", str(target), "--prompt", "The rain in", "--max-tokens", "6",
                 "--out", str(tmp_path / "one")]) == 0
    assert generated == json.loads((tmp_path / "one" / "summary.json").read_text())["tokens"]
    assert all(line["gamma"] <= 14 for line in restarted[1:])
    assert all(line["comm"]["commands_ms"] > 0 for i, line in enumerate(lines) if i not in headers)


@pytest.mark.slow
@linux_only
def test_tui_rank_that_dies_ends_the_app_with_a_line_naming_it(make_pair, tmp_path):
    target, _ = make_pair("llama")
    term, modes = _tui_on_two_ranks(target, tmp_path)
    try:
        term.when("ready after prefill", timeout=HANG_GUARD_S)
        os.kill(_rank_pid(term.process.pid, 1), signal.SIGKILL)
        term.process.wait(timeout=HANG_GUARD_S)
        import termios

        restored = termios.tcgetattr(term.master)
    finally:
        term.close()
    output = term.text()
    assert "dflash-tui: error: rank 0 of 2: rank 1 ended" in output, output[-2000:]
    assert "\x1b[?1049l" in output and "Traceback" not in output
    assert restored == modes


@pytest.mark.slow
def test_a_launched_group_of_one_runs_alone(make_pair, tmp_path):
    """`mlx.launch -n 1` (one GPU): the ring backend's hostfile for one rank is empty, which
    MLX cannot read; the rank runs as a group of one, through the same lockstep path."""
    target, _ = make_pair("llama")
    done = _launch([str(BIN / "dflash-tui"), "probe", str(target), "--max-tokens", "4",
                    "--out", str(tmp_path / "alone"), "--distributed"], tmp_path, ranks=1)
    summary = json.loads((tmp_path / "alone" / "summary.json").read_text())
    assert summary["session"]["distributed"]["world_size"] == 1, done.stderr
    assert summary["session"]["distributed"]["per_rank"].startswith("heads 4/4")
