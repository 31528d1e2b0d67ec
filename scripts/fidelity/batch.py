"""Cells of several runs computed by one engine (the time-boxed runner's tasks).

A run ("group") is named by the flags of `bench fidelity` or `bench agreement`. A cell
(method, budget) depends only on the engine options, so the texts (or problems) of every
group that needs it go through one engine together: on a GPU a batch
of 30 texts costs about what one costs. Each group's share is saved in that group's own cell
store under the key its own command computes, so `<command> --report-only` tabulates it.
Rows of one request never depend on the other requests of the batch (exactness tests), up to
the GPU's batch-size dependent rounding.
"""
import argparse
import functools
import shlex
import time

import torch

from scripts.common import environment
from scripts.fidelity import agreement as ag
from scripts.fidelity import engine as fe
from scripts.fidelity import group as fg
from scripts.fidelity import methods as fm
from scripts.fidelity import nll as fid
from tasks.base import get_task  # noqa: F401  (agreement's tasks register on import)
from zipage import LLM


def parse(module, flags: str):
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(shlex.split(flags))


def fidelity_args(flags: str):
    args = fg.finish_args(parse(fid, flags))
    args.device = fid.resolve_device(args.device)
    return args


def _shared(groups, *fields):
    for f in fields:
        values = {repr(getattr(g, f)) for g in groups}
        if len(values) > 1:
            raise ValueError(f"groups batched in one cell must share {f}, got {values}")


def build_texts(groups: list[str], sources_file: dict | None = None) -> dict:
    """The texts cell of every group, in order (a later group may exclude an earlier one's
    records through a sources file: sources_file = {group index: path} writes them)."""
    import json
    from scripts.fidelity.cells import write_atomic
    torch.set_num_threads(1)
    fe.cache_model_loading()
    made = {}
    for i, flags in enumerate(groups):
        args = fidelity_args(flags)
        key = fg.texts_key(args, args.device)
        ident = json.dumps(key, sort_keys=True)
        if ident not in made:
            made[ident] = fid._texts(args, fg.store(args), args.device,
                                      lambda: fe.load_tokenizer(args.model))
        else:
            fg.store(args).get_or_run("texts", key, lambda: {k: v for k, v in made[ident].items()
                                                             if k != "key"})
        cell = made[ident]
        path = (sources_file or {}).get(i) or (sources_file or {}).get(str(i))
        if path:
            write_atomic(path, json.dumps(dict(text_sources=cell["sources"],
                                               note=f"records of {args.out}")))
    return dict(groups=len(groups))


def fidelity_cell(groups: list[str], method: str | None, budget: int | None = None) -> dict:
    """One engine over the texts of every group still missing cell `method@budget` (or the
    Full-KV reference when method is None; budget is then unused)."""
    torch.set_num_threads(1)
    fe.cache_model_loading()
    todo = []
    for flags in groups:
        args = fidelity_args(flags)
        st = fg.store(args)
        texts = st.load("texts", fg.texts_key(args, args.device))
        if texts is None:
            raise RuntimeError(f"no texts for {args.out}: run the texts task first")
        texts = texts["texts"]
        sha, n_text = fg.text_sha(texts), len(texts[0])
        fg.check_budgets(args, texts)
        if method is None:
            name, key = "full", fg.full_key(args, sha, args.device)
            P, end = fg.full_prompt(args), n_text
        else:
            B = budget
            if B not in args.budgets:
                raise ValueError(f"budget {B} is not one of {args.out}'s budgets {args.budgets}")
            name, key = f"{method}@{B}", fg.cell_key(args, method, B, sha, n_text, args.device)
            P, end = fg.prompt_len(args, B), fg.forced_end(args, B, n_text)
        if st.load(name, key) is None:
            todo.append((args, st, name, key, P, [t[:end] for t in texts]))
    if not todo:
        return dict(ran=0)
    gs = [a for a, *_ in todo]
    _shared(gs, "model", "block_size", "window", "sinks", "device", "dtype")
    if len({P for *_, P, _ in todo}) > 1 or (method is None and any(
            a.reference != "engine" for a in gs)):
        raise ValueError("batched groups need one prompt length and the engine reference")
    a0, P = gs[0], todo[0][4]
    texts = [t for *_, sub in todo for t in sub]
    budget = None if method is None else budget
    opts = (dict(observation_window=a0.window) if method is None
            else fg.method_options(a0, method))
    t0 = time.perf_counter()
    recs, stats = fe.run_engine(a0.model, texts, P, budget, a0.block_size, opts, a0.device,
                                a0.dtype)
    seconds = time.perf_counter() - t0
    env = environment(torch.device(a0.device))
    batch = [a.out for a in gs]
    k = 0
    for args, st, name, key, P, sub in todo:
        mine, k = recs[k:k + len(sub)], k + len(sub)
        payload = dict(prompt_tokens=P, records=mine, stats=stats, seconds=seconds,
                       environment=env, batched_with=batch)
        if method is not None:
            payload.update(method=method, budget=budget)
        st.save(name, key, **payload)
    return dict(ran=len(todo), texts=len(texts), seconds=seconds)


@functools.cache
def _problems(flags: str):
    args = parse(ag, flags)
    args.device = fid.resolve_device(args.device)
    task, problems = ag.load_problems(args)
    return args, task, problems


def agreement_cell(groups: list[str], method: str, budget: int | None) -> dict:
    """One engine generating the problems of every group still missing cell method@budget
    (method "full", budget None: Full KV). Saved ungraded; grade with --report-only."""
    torch.set_num_threads(1)
    fe.cache_model_loading()
    tok = fe.load_tokenizer(parse(ag, groups[0]).model)
    todo = []
    for flags in groups:
        args, task, problems = _problems(flags)
        st = ag.store(args)
        name = "full" if budget is None else f"{method}@{budget}"
        key = ag.cell_key(args, problems, method, budget, args.device)
        if st.load(name, key) is None:
            todo.append((args, st, name, key, problems, ag.build_prompts(args, task, problems,
                                                                         tok)))
    if not todo:
        return dict(ran=0)
    gs = [a for a, *_ in todo]
    _shared(gs, "model", "block_size", "window", "sinks", "device", "dtype")
    a0 = gs[0]
    opts = {} if method == "full" else fm.options(method, a0.sinks)
    prompts, params, kv = [], [], 0
    for args, *_, problems, pr in todo:
        prompts += pr
        params += ag.sampling_params(args, len(pr))
        kv += len(pr) * args.samples * ag.kv_tokens_per_request(args, pr, budget, opts)
    t0 = time.perf_counter()
    llm = LLM(a0.model, device=a0.device, dtype=a0.dtype, budget=budget,
              block_size=a0.block_size, max_num_seqs=sum(p.n for p in params),
              kv_cache_tokens=kv + 4 * a0.block_size,
              **{"observation_window": a0.window, **opts})  # a preset's own W wins
    outs = llm.generate(prompts, params, use_tqdm=False)
    stats = llm.last_stats.as_dict()
    llm.shutdown()
    del llm
    seconds = time.perf_counter() - t0
    env = environment(torch.device(a0.device))
    k = 0
    for args, st, name, key, problems, pr in todo:
        mine, k = outs[k:k + len(pr)], k + len(pr)
        st.save(name, key, rows=ag.rows_of(problems, mine, args.samples), stats=stats,
                seconds=seconds, environment=env, batched_with=[a.out for a in gs])
    return dict(ran=len(todo), requests=len(prompts), seconds=seconds)
