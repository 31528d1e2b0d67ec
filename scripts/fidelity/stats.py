"""Statistics of teacher-forced runs against Full KV (pure Python, tested on CPU).

A record covers the forced tokens of one text from text index `prompt_tokens` on: `logprobs`
(log p of each text token) and `argmax` (the greedy token at each position). Scores count only
positions from `start` on (e.g. budget + block size: after the first possible compression).
Standard errors are per token (the tokens of all texts pooled), as in the block-16 study;
per-text means are kept too.
"""
import math


def mean(xs) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def standard_error(xs) -> float:
    """Standard error of the mean of `xs` (sample standard deviation / sqrt(n))."""
    n = len(xs)
    if n < 2:
        return float("nan")
    m = mean(xs)
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n)


def aligned(rec: dict, prompt_tokens: int, ref: dict, ref_prompt_tokens: int, start: int):
    """(log p, argmax, reference log p, reference argmax) of `rec` from text index `start`.

    `ref` forces the same text from ref_prompt_tokens <= prompt_tokens on, at least as far:
    teacher forcing is causal, so its value at a text index does not depend on where its
    prompt ended.
    """
    if ref_prompt_tokens > prompt_tokens:
        raise ValueError("the reference must start at or before the run it is compared with")
    n = len(rec["logprobs"])
    first = max(0, start - prompt_tokens)
    off = prompt_tokens - ref_prompt_tokens
    if len(ref["logprobs"]) < off + n:
        raise ValueError("the reference record is shorter than the run it is compared with")
    return (rec["logprobs"][first:], rec["argmax"][first:],
            ref["logprobs"][off + first:off + n], ref["argmax"][off + first:off + n])


def summarize(recs, prompt_tokens: int, ref, ref_prompt_tokens: int, start: int) -> dict:
    """NLL, its increase over the reference (paired per token, with SE), argmax agreement."""
    diff, nll, nll_ref, agree, per_text = [], [], [], [], []
    for rec, f in zip(recs, ref, strict=True):
        lp, top, f_lp, f_top = aligned(rec, prompt_tokens, f, ref_prompt_tokens, start)
        d = [b - a for a, b in zip(lp, f_lp)]  # -log p(run) - (-log p(ref))
        diff += d
        nll += [-x for x in lp]
        nll_ref += [-x for x in f_lp]
        agree += [a == b for a, b in zip(top, f_top)]
        per_text.append(mean(d))
    return dict(num_tokens=len(diff), first_scored=max(start, prompt_tokens), nll=mean(nll),
                nll_full=mean(nll_ref), delta_nll=mean(diff), delta_nll_se=standard_error(diff),
                argmax_agreement=mean(agree), argmax_agreement_se=standard_error(agree),
                delta_nll_per_text=per_text,
                num_compressions=[r.get("num_compressions") for r in recs],
                peak_kv_tokens=[r.get("peak_kv_tokens") for r in recs])


def paired(recs_a, recs_b, prompt_tokens: int, start: int) -> dict:
    """Per-token NLL difference a - b on the same tokens (both runs forced from the same
    prompt): mean, standard error, per-text means. Negative: a predicts the text better."""
    first = max(0, start - prompt_tokens)
    diff, per_text = [], []
    for a, b in zip(recs_a, recs_b, strict=True):
        if len(a["logprobs"]) != len(b["logprobs"]):
            raise ValueError("paired runs must force the same tokens")
        d = [y - x for x, y in zip(a["logprobs"][first:], b["logprobs"][first:])]
        per_text.append(mean(d))
        diff += d
    return dict(mean=mean(diff), se=standard_error(diff), num_tokens=len(diff), per_text=per_text)
