"""A deterministic stand-in for zipage.LLM with the public API of docs/design.md.

It behaves like a batched engine on a clock it owns: every sample of a generate call runs
at once, one token per step per running sample, and a step costs
`step_s + token_s * running` seconds of `FakeClock` time (the harness's segment timer is
pointed at the same clock, so timings are exact and tests are fast). Knobs:
`crash_after` samples (a RuntimeError), `interrupt_at_step` (a KeyboardInterrupt, as from
Ctrl-C), `report_interrupted` (set `last_stats` for an interrupted call, with unfinished
samples' tokens counted), `on_step(step)` (a hook, e.g. to let another thread act); the
engine kwarg `max_num_seqs` runs at most that many samples at once (one by one: 1).
"""
import random
import re
from dataclasses import dataclass, field


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeTokenizer:
    chat_template = "fake"
    bos_token = None

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True, **kw):
        return "".join(f"<{m['role']}>{m['content']}" for m in msgs) + "<assistant>"

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


class OtherTemplateTokenizer(FakeTokenizer):
    chat_template = "other"

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True, **kw):
        return "".join(f"[{m['role']}] {m['content']}" for m in msgs) + "[assistant] "


@dataclass
class FakeSamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 16
    seed: int | None = None


@dataclass
class FakeCompletion:
    index: int
    text: str
    token_ids: list
    finish_reason: str
    metrics: dict = field(default_factory=dict)


@dataclass
class FakeOutput:
    outputs: list
    error: str | None = None


class FakeStats:
    def __init__(self, **kw):
        self.__dict__.update(kw)

    def as_dict(self):
        return dict(self.__dict__)


def completion_for(prompt: str, seed: int, budget) -> tuple[str, str]:
    """(text, finish_reason): right, wrong, or truncated, decided by (problem, seed)."""
    k = int(re.search(r"q(\d+):", prompt).group(1))
    rng = random.Random(f"{k}|{seed}|{budget is None}")
    roll = rng.random()
    if roll < 0.55:
        return f"<think>maybe \\boxed{{{k + 1}}}</think> So \\boxed{{{2 * k}}}.", "stop"
    if roll < 0.85:
        return f"I think \\boxed{{{2 * k + 1}}}", "stop"
    return f"<think>{2 * k} ... and then", "length"


class FakeLLM:
    instances: list = []

    def __init__(self, model, clock=None, crash_after=None, interrupt_at_step=None,
                 report_interrupted=True, on_step=None, tokenizer=None, **kwargs):
        self.model, self.kwargs = model, kwargs
        self.clock = clock or FakeClock()
        self.crash_after, self.interrupt_at_step = crash_after, interrupt_at_step
        self.report_interrupted, self.on_step = report_interrupted, on_step
        self.tokenizer, self.max_model_len = tokenizer or FakeTokenizer(), 4096
        self.generated = 0
        self.last_stats = FakeStats()
        # Full KV is slower per step (it reads the whole cache), so a budget run has a speedup.
        self.step_s, self.token_s = (8e-3, 1e-3) if kwargs.get("budget") is None else (4e-3, 4e-4)
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True, on_sample=None):
        outs, running = [], []
        for k, (ids, sp) in enumerate(zip(prompts, params)):
            text = "".join(map(chr, ids))
            outs.append(FakeOutput([]))
            if "q99:" in text:
                outs[-1].error = "prompt too long"
                continue
            for i in range(sp.n):
                body, reason = completion_for(text, sp.seed + i, self.kwargs.get("budget"))
                if len(body) > sp.max_tokens:  # one token per character, cut like an engine
                    body, reason = body[:sp.max_tokens], "length"
                running.append([k, FakeCompletion(i, body, list(range(len(body))), reason), 0])
        # engine.max_num_seqs: at most that many samples run at once, the rest wait
        limit = self.kwargs.get("max_num_seqs") or len(running) or 1
        running, waiting = running[:limit], running[limit:]
        tokens = steps = 0
        t0 = self.clock.t
        while running:
            steps += 1
            if self.on_step:
                self.on_step(steps)
            if self.interrupt_at_step is not None and steps == self.interrupt_at_step:
                if self.report_interrupted:
                    self._stats(tokens + sum(r[2] for r in running), t0, interrupted=True)
                raise KeyboardInterrupt
            self.clock.t += self.step_s + self.token_s * len(running)
            for r in running:
                r[2] += 1
            for r in [r for r in running if r[2] == len(r[1].token_ids)]:
                running.remove(r)
                if waiting:
                    running.append(waiting.pop(0))
                tokens += r[2]
                outs[r[0]].outputs.append(r[1])
                on_sample(r[0], r[1])
                self.generated += 1
                if self.crash_after is not None and self.generated >= self.crash_after:
                    raise RuntimeError("simulated crash")
        self._stats(tokens, t0)
        return outs

    def _stats(self, tokens, t0, **kw):
        wall = self.clock.t - t0
        self.last_stats = FakeStats(wall_time_s=wall, num_output_tokens=tokens,
                                    num_prompt_tokens=0, peak_running=1, mean_running=1.0,
                                    compression_time_s=0.0, num_compressions=0, **kw)


def make_engine(model_id, kwargs):
    """A module-level engine factory (picklable: data-parallel replicas are spawned).
    FAKE_CRASH_REPLICA=r with FAKE_CRASH_AFTER=k: replica r raises after k samples;
    FAKE_STEP_S=s: every step sleeps s seconds; FAKE_PID_DIR=d: each replica writes its pid
    to d/<rank>."""
    import os
    import time
    crash = None
    rank = os.environ.get("ZIPAGE_DP_RANK", "0")
    if os.environ.get("FAKE_CRASH_REPLICA") == rank:
        crash = int(os.environ["FAKE_CRASH_AFTER"])
    if os.environ.get("FAKE_PID_DIR"):
        with open(os.path.join(os.environ["FAKE_PID_DIR"], rank), "w") as f:
            f.write(str(os.getpid()))
    delay = float(os.environ.get("FAKE_STEP_S", "0"))
    on_step = (lambda step: time.sleep(delay)) if delay else None
    return FakeLLM(model_id, crash_after=crash, on_step=on_step, **kwargs), FakeSamplingParams


def make_tokenizer(model_id, kwargs):
    return FakeTokenizer()
