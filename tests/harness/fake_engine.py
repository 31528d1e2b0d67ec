"""A deterministic stand-in for zipage.LLM with the public API of docs/design.md."""
import random
import re
from dataclasses import dataclass, field


class FakeTokenizer:
    chat_template = "fake"
    bos_token = None

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=True, **kw):
        return "".join(f"<{m['role']}>{m['content']}" for m in msgs) + "<assistant>"

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


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
    if k == 99:
        return "", "error"
    if roll < 0.55:
        return f"<think>maybe \\boxed{{{k + 1}}}</think> So \\boxed{{{2 * k}}}.", "stop"
    if roll < 0.85:
        return f"I think \\boxed{{{2 * k + 1}}}", "stop"
    return f"<think>{2 * k} ... and then", "length"


class FakeLLM:
    instances: list = []

    def __init__(self, model, crash_after=None, **kwargs):
        self.model, self.kwargs, self.crash_after = model, kwargs, crash_after
        self.tokenizer, self.max_model_len = FakeTokenizer(), 4096
        self.generated = 0
        self.last_stats = FakeStats()
        FakeLLM.instances.append(self)

    def generate(self, prompts, params, use_tqdm=True, on_sample=None):
        outs, tokens = [], 0
        for k, (ids, sp) in enumerate(zip(prompts, params)):
            text = "".join(map(chr, ids))
            if "q99:" in text:
                outs.append(FakeOutput([], error="prompt too long"))
                continue
            comps = []
            for i in range(sp.n):
                body, reason = completion_for(text, sp.seed + i, self.kwargs.get("budget"))
                c = FakeCompletion(i, body, list(range(len(body))), reason)
                comps.append(c)
                tokens += len(body)
                on_sample(k, c)
                self.generated += 1
                if self.crash_after is not None and self.generated >= self.crash_after:
                    raise RuntimeError("simulated crash")
            outs.append(FakeOutput(comps))
        speed = 200.0 if self.kwargs.get("budget") is None else 500.0  # tokens/s
        self.last_stats = FakeStats(wall_time_s=tokens / speed, num_output_tokens=tokens,
                                    num_prompt_tokens=0, output_tokens_per_s=speed,
                                    peak_running=len(prompts), mean_running=1.0,
                                    compression_time_s=0.0, num_compressions=0)
        return outs
