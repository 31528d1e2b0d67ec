"""One tensor-parallel rank of an engine: its share of the model and a ModelRunner over it,
driven step by step through a pipe from the engine process (zipage/distributed/tp_runner.py).

Every rank runs every step: the same compressions on its own KV heads (selection is per
head: no cross-rank traffic, docs/method.md §6-§7), the forward (its collectives meet the
other ranks'), and sampling over the gathered logits, so every rank holds the same sampled
tokens on its own device for the next step. Only rank 0 sends its StepResult back.

Messages (pickled tuples, engine -> rank): ("launch", step_id, (SchedulerOutput, previous
step_id or None)), ("collect", step_id, None), ("stop", 0, None). Rank -> engine:
("ready", rank, MemoryPlan) once, ("result", step_id, StepResult) from rank 0 per collect,
("error", rank, traceback text) from any rank that fails (then it exits).
"""
import pickle
import signal
import traceback
from dataclasses import dataclass

import torch


@dataclass
class RankSetup:
    """What every rank needs to build its runner (picklable)."""
    config: object  # EngineConfig
    spec: object  # ModelSpec of the whole model
    path: str | None
    gguf: str | None
    dtype: torch.dtype
    max_model_len: int
    eos_token_ids: frozenset


def serve(tp, setup: RankSetup, conn) -> None:
    """The rank's loop (run by RankProcesses); returns when told to stop or the pipe closes."""
    # Ctrl-C reaches the whole process group: the engine process handles it (it aborts its
    # requests and stays usable); a rank leaving mid-collective would strand the others.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        runner = _build(tp, setup)
        conn.send(("ready", tp.rank, runner.plan))
        _loop(tp, runner, conn)
    except BaseException:
        try:
            conn.send(("error", tp.rank, traceback.format_exc()))
        except (OSError, ValueError):
            pass  # the engine is gone
        raise
    finally:
        conn.close()


def _build(tp, s: RankSetup):
    from zipage.models.loader import build_model
    from zipage.worker.model_runner import ModelRunner
    cfg = s.config
    model = build_model(s.spec, s.path, s.gguf, cfg.load_format, s.dtype, tp.device, cfg.seed,
                        tp=tp)
    return ModelRunner(cfg, model, tp.device, s.dtype, s.max_model_len, set(s.eos_token_ids))


def _loop(tp, runner, conn) -> None:
    handles: dict[int, object] = {}
    while True:
        try:
            kind, step_id, payload = pickle.loads(conn.recv_bytes())
        except EOFError:  # the engine closed its end: shut down
            return
        if kind == "stop":
            return
        if kind == "launch":
            step, previous = payload
            handles[step_id] = runner.launch(step, handles.get(previous))
        elif kind == "collect":
            # Older handles were abandoned by an interrupted call: their results are dropped.
            for old in [k for k in handles if k < step_id]:
                del handles[old]
            handle = handles.pop(step_id, None)
            if handle is None:
                raise RuntimeError(f"collect of step {step_id}, which was never launched")
            result = runner.collect(handle)
            if tp.rank == 0:
                conn.send_bytes(pickle.dumps(("result", step_id, result), protocol=5))
        else:
            raise RuntimeError(f"unknown message {kind!r}")
