"""The progress bar of ``LLM.generate``: finished samples, with what a user watching a long
run wants beside them.

    generate:  40%|████      | 26/64 [01:10<01:45, out_tok_s=1843, running=38, waiting=0,
               kv=87%, compressions=412, left<=02:51]

``left<=`` bounds the time left: the tokens every unfinished sample may still generate (up to
its ``max_tokens`` or ``max_model_len``) at the output rate so far. Samples that stop early
make the run end sooner; a falling batch size at the end makes each token slower, so read it
as an estimate. tqdm's own estimate (after ``<``) extrapolates finished samples instead.
"""
import time

from tqdm.auto import tqdm

REFRESH_S = 0.5


class Progress:
    def __init__(self, engine, num_samples: int, start: float, enabled: bool = True):
        self.engine, self.start, self.enabled = engine, start, enabled
        self.compressions0 = engine.scheduler.num_compressions
        self.finished_tokens = 0
        self.last = 0.0
        self.bar = tqdm(total=num_samples, desc="generate", disable=not enabled, dynamic_ncols=True)

    def sample_done(self, num_output_tokens: int) -> None:
        self.finished_tokens += num_output_tokens
        self.bar.update(1)

    def refresh(self) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.last < REFRESH_S:
            return
        self.last = now
        self.bar.set_postfix(self.numbers(now), refresh=False)

    def numbers(self, now: float | None = None) -> dict:
        e, s = self.engine, self.engine.scheduler
        elapsed = max((now or time.perf_counter()) - self.start, 1e-9)
        unfinished = list(s.requests.values())
        generated = self.finished_tokens + sum(q.num_output_tokens for q in unfinished)
        rate = generated / elapsed
        left = sum(q.max_num_tokens - len(q) for q in unfinished)
        return {"out_tok_s": f"{rate:.0f}", "running": len(s.running), "waiting": len(s.waiting),
                "kv": f"{e.kv_usage:.0%}", "compressions": s.num_compressions - self.compressions0,
                "left<": tqdm.format_interval(left / rate) if rate > 0 else "?"}

    def close(self) -> None:
        self.bar.close()
