"""The TUI on a group of ranks (docs/DISTRIBUTED.md): rank 0 runs the app, every other rank
runs the same session headless, told what to do by rank 0.

Everything the app does to a session goes through rank 0's engine thread: opening one,
prefill, each stage, γ, keeping raw buffers, closing. Under `--distributed` that thread holds
a `Leader` in place of its Pair: before each of those calls it broadcasts a small command
(an op code, a session number, a value and, to open a session, its prompt and options as
JSON), and the other ranks, in `follow`, make the same call on their own session. The
sharded target's forwards then meet in their all_sums, and after every round the ranks
compare what they committed (engine/lockstep.py). Breakpoints, the history and every panel
live on rank 0 only: the other ranks just step when told.

A command is one all_sum of four int32s from rank 0 (zeros from the others), plus one for a
payload; its time is counted in the round's `comm.commands_ms`.

Failure, never a hang: a follower that fails (or loses rank 0) prints one line naming its
rank and exits 1; mlx.launch then ends the others. Rank 0's engine thread, on an error of
the group or of a stage, keeps the reason (`mesh.failure`) and sends its own process SIGTERM,
which the app turns into a clean exit (app/launched.py); the launcher's SIGTERM, when
another rank exited first, lands in the same place.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import asdict, replace
from enum import IntEnum
from typing import Optional

import mlx.core as mx
import numpy as np

from ..engine.distributed import Mesh
from ..engine.errors import GroupError, InputError
from ..engine.session import SessionOptions
from .engine_thread import _one_line as one_line


class Op(IntEnum):
    OPEN = 1  # payload: {"prompt", "chat", "options"}
    PREFILL = 2
    STEP = 3  # one stage
    GAMMA = 4  # value: γ
    KEEP_RAW = 5  # value: 0 | 1
    CLOSE = 6
    QUIT = 7


class Channel:
    """Rank 0's commands to every rank, over the group's own collectives."""

    def __init__(self, mesh: Mesh):
        self.mesh = mesh

    def _all_sum(self, values: np.ndarray) -> np.ndarray:
        return np.array(mx.distributed.all_sum(mx.array(values), group=self.mesh.group))

    def send(self, op: Op, session: int = 0, value: int = 0, payload: bytes = b"") -> None:
        t0 = time.perf_counter()
        self._all_sum(np.array([op, session, value, len(payload)], dtype=np.int32))
        if payload:
            self._all_sum(np.frombuffer(payload, dtype=np.uint8).astype(np.int32))
        self.mesh.commands_ms += (time.perf_counter() - t0) * 1000

    def receive(self) -> tuple[Op, int, int, bytes]:
        op, session, value, size = (int(v) for v in self._all_sum(np.zeros(4, dtype=np.int32)))
        payload = b""
        if size:
            payload = self._all_sum(np.zeros(size, dtype=np.int32)).astype(np.uint8).tobytes()
        return Op(op), session, value, payload


# ---- rank 0 ------------------------------------------------------------------------------------

class Leader:
    """Stands in for the Pair on rank 0's engine thread: opens sessions on every rank."""

    def __init__(self, pair, mesh: Mesh):
        self.pair, self.mesh = pair, mesh
        self.channel = Channel(mesh)
        self._opened = 0

    def open(self, prompt: str, *, options: SessionOptions = SessionOptions(),
             chat: Optional[bool] = None, prefill: bool = True,
             source: Optional[str] = None) -> "LeaderSession":
        if options.proposer is not None:
            raise ValueError("forced proposals exist on rank 0 only; a group cannot follow them")
        self._opened += 1
        number = self._opened
        spec = {"prompt": prompt, "chat": chat, "options": asdict(replace(options, proposer=None))}
        self.call(lambda: self.channel.send(Op.OPEN, number, payload=json.dumps(spec).encode()))
        session = LeaderSession(self.call(lambda: self.pair.open(prompt, options=options, chat=chat,
                                                                 prefill=False, source=source)),
                                number, self)
        if prefill:
            session.prefill()
        return session

    def close(self) -> None:
        """Every rank leaves (the app quits); a group already broken has no one to tell."""
        if self.mesh.failure is None:
            self.call(lambda: self.channel.send(Op.QUIT))

    def call(self, work):
        """Run `work`; an error that the other ranks cannot follow past ends the group."""
        try:
            return work()
        except InputError:  # bad input is refused the same way on every rank
            raise
        except Exception as error:
            if self.mesh.failure is None:
                self.mesh.failure = describe(self.mesh, error)
                os.kill(os.getpid(), signal.SIGTERM)  # the app leaves cleanly (app/launched.py)
            raise


class LeaderSession:
    """A Session whose every change is first broadcast to the other ranks."""

    def __init__(self, session, number: int, leader: Leader):
        self._session, self._number, self._leader = session, number, leader

    def __getattr__(self, name):
        return getattr(self._session, name)

    def _do(self, op: Op, work, value: int = 0):
        def told_then_done():
            self._leader.channel.send(op, self._number, value)
            return work()

        return self._leader.call(told_then_done)

    def prefill(self):
        return self._do(Op.PREFILL, self._session.prefill)

    def step_stage(self):
        return self._do(Op.STEP, self._session.step_stage)

    def set_gamma(self, gamma: int) -> int:
        return self._do(Op.GAMMA, lambda: self._session.set_gamma(gamma), gamma)

    def set_keep_raw(self, on: bool) -> None:
        self._do(Op.KEEP_RAW, lambda: self._session.set_keep_raw(on), int(on))

    def close(self) -> None:
        self._do(Op.CLOSE, self._session.close)


# ---- every other rank ----------------------------------------------------------------------------

def follow(pair, mesh: Mesh) -> int:
    """Make rank 0's calls on this rank's sessions until rank 0 quits. Returns the exit
    code: 0 when told to quit, 1 (after one line naming this rank) on any failure."""
    channel, sessions = Channel(mesh), {}
    try:
        while True:
            op, number, value, payload = channel.receive()
            if op is Op.QUIT:
                for session in sessions.values():
                    session.close()
                return 0
            try:
                _apply(pair, sessions, op, number, value, payload)
            except InputError:  # rank 0 met the same refusal and carries on
                continue
    except Exception as error:  # noqa: BLE001 - one line, then the launcher ends the rest
        print(f"dflash-tui: error: {mesh.who}: {describe(mesh, error)}", file=sys.__stderr__,
              flush=True)
        return GroupError.exit_code


def describe(mesh: Mesh, error: BaseException) -> str:
    """An error that ends the group, in one line."""
    lost = mesh.lost_contact(error)
    if lost is not None or isinstance(error, GroupError):
        return str(lost or error)
    return one_line(error)


def _apply(pair, sessions: dict, op: Op, number: int, value: int, payload: bytes) -> None:
    if op is Op.OPEN:
        spec = json.loads(payload)
        sessions[number] = pair.open(spec["prompt"], options=SessionOptions(**spec["options"]),
                                     chat=spec["chat"], prefill=False)
        return
    session = sessions[number]
    if op is Op.PREFILL:
        session.prefill()
    elif op is Op.STEP:
        session.step_stage()
    elif op is Op.GAMMA:
        session.set_gamma(value)
    elif op is Op.KEEP_RAW:
        session.set_keep_raw(bool(value))
    elif op is Op.CLOSE:
        sessions.pop(number).close()
