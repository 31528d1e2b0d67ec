"""The issue-13 measurements as prioritised tasks (for `bench fidelity-gpu`, gpu.py).

Priority 1: block 256 (the paper's), budgets 1024 and 2048, on test texts of both sources
(human solutions; SmolLM2's own sampled solutions) for every method, and on disjoint tuning
texts for the scoring candidates (the weight sweep selects there). Priority 2: block 64,
budgets 512/1024/2048. Priority 3: end-to-end answer agreement (greedy GSM8K and MATH-500,
GSM8K at T 0.6 over seeds), block 16, budgets 128-512. Priority 5: the MATH-500 greedy
agreement of priority 3 over every problem, default vs recent only (at 100 problems its SE,
2-5%, was larger than the differences it had to decide). Priority 4 (issue 17): every
comparison preset next to the default, the paper score, recent and random on the test
solutions, at block 256 (budgets 1024/2048) and block 16 (budgets 128-512, shorter texts).
Priority 6: recency protection for the default (attention + sinks, + a recent share of the
kept tokens): agreement on GSM8K problems disjoint from priority 3's (where the candidate is
chosen) and on every MATH-500 problem (where it is reported), next to the default and recent.
Priority 7: those candidates' NLL at block 256 on priority 1's test texts.
Each task is one engine; every group (run) that needs a (method, budget) cell shares it
(batch.py).
"""
from dataclasses import dataclass, field

from scripts.fidelity.timebox import Task
from zipage.compression.presets import COMPARISON

DEV_SWEEP = "results/fidelity_smollm2_dev_sweep.json"  # the block-16 study's tuning texts
SWEEP = ["rw=0.5", "rw=0.35", "rw=0.65", "rw=0.1", "rw=0"]
KV_BYTES_PER_TOKEN = {"float32": 30 * 2 * 3 * 64 * 4, "bfloat16": 30 * 2 * 3 * 64 * 2}  # SmolLM2


@dataclass
class Profile:
    device: str
    dtype: str = "float32"
    model: str = "smollm2-135m"
    text_tokens: int = 4096
    block: int = 256
    budgets: tuple = (1024, 2048)
    block2: int = 64
    budgets2: tuple = (512, 1024, 2048)
    num_solution_texts: int = 12
    num_generated_texts: int = 8
    num_tuning_texts: int = 12
    solution_tokens: int = 512
    test_methods: tuple = ("default", "attn", "recent", "paper", "random", "attn_global", *SWEEP)
    tune_methods: tuple = ("default", "attn", "paper", "attn_global", *SWEEP)
    # "attn" is the default since the block-256 decision; "full" is the score it replaced.
    methods2: tuple = ("default", "full", "recent", "random", "paper", "attn_global", "rw=0.5",
                       "rw=0")
    agree_block: int = 16
    agree_budgets: tuple = (128, 256, 512)
    agree_max_tokens: int = 1024
    agree_problems: int = 100
    agree_samples: int = 4
    agree_methods: tuple = ("default", "recent", "attn", "paper", "random")
    all_problems: int = 500  # MATH-500
    all_methods: tuple = ("default", "recent")
    cand_methods: tuple = ("default", "recent", "attn_sinks", "attn_recent=0.25")
    tune_problems: int = 200  # GSM8K, after priority 3's agree_problems
    preset_methods: tuple = ("default", "full", "paper", "recent", "random", *COMPARISON)
    preset_block16: int = 16
    preset_budgets16: tuple = (128, 256, 512)
    preset_text_tokens16: int = 2048
    suffix: str = "_h200"
    prior_rate: dict = field(default_factory=lambda: {"fidelity": 0.02, "agree": 0.05,
                                                       "texts": 0.1})
    overhead_s: float = 15.0
    workers: int = 8


PROFILES = {
    "h200": Profile(device="cuda"),
    # The same code path in about a minute on a CPU (logic check, not measurements).
    "tiny": Profile(device="cpu", text_tokens=112, block=16, budgets=(32, 64), block2=32,
                    budgets2=(32, 64), num_solution_texts=2, num_generated_texts=1,
                    num_tuning_texts=2, solution_tokens=24,
                    test_methods=("default", "attn", "recent", "random", "rw=0.5"),
                    tune_methods=("default", "attn", "rw=0.5"), methods2=("default", "recent"),
                    agree_budgets=(32,), agree_max_tokens=24, agree_problems=2,
                    agree_samples=2, agree_methods=("default", "recent"), all_problems=3,
                    cand_methods=("default", "attn_recent=0.25"), tune_problems=2,
                    preset_methods=("default", "recent", "rkv", "snapkv", "h2o"),
                    preset_budgets16=(32,), preset_text_tokens16=80, suffix="_tiny",
                    prior_rate={"fidelity": 0.2, "agree": 0.5, "texts": 1.0},
                    overhead_s=3.0, workers=2),
}


def fidelity_groups(p: Profile, results: str) -> dict:
    """role -> flags of `bench fidelity` (with --out), in build order."""
    common = (f"--model {p.model} --text-tokens {p.text_tokens} --device {p.device} "
              f"--dtype {p.dtype} --reference engine --solution-tokens {p.solution_tokens}")
    b1 = f"--block-size {p.block} --budgets {' '.join(map(str, p.budgets))}"
    b2 = f"--block-size {p.block2} --budgets {' '.join(map(str, p.budgets2))}"
    sol = f"--text-source solutions --num-texts {p.num_solution_texts} --seed 2 " \
          f"--exclude-sources {DEV_SWEEP}"  # seed 2: the CPU table's 4 texts come first
    gen = f"--text-source generated --num-texts {p.num_generated_texts} --seed 3"
    tune = f"--text-source solutions --num-texts {p.num_tuning_texts} --seed 1 " \
           f"--exclude-sources {DEV_SWEEP} {test_sources(p, results)}"

    b16 = (f"--block-size {p.preset_block16} --budgets {' '.join(map(str, p.preset_budgets16))}"
           f" --text-tokens {p.preset_text_tokens16}")  # the last --text-tokens wins

    def g(name, block_flags, text_flags, methods):
        return (f"{common} {block_flags} {text_flags} --out {results}/fidelity_{name}{p.suffix}"
                f"{_cells(results, f'fidelity_{name}{p.suffix}')} --methods {' '.join(methods)}")
    return {"solutions": g(f"b{p.block}_solutions", b1, sol, p.test_methods),
            "generated": g(f"b{p.block}_generated", b1, gen, p.test_methods),
            "tuning": g(f"b{p.block}_tuning", b1, tune, p.tune_methods),
            "solutions2": g(f"b{p.block2}_solutions", b2, sol, p.methods2),
            "generated2": g(f"b{p.block2}_generated", b2, gen, p.methods2),
            "presets": g(f"b{p.block}_presets", b1, sol, p.preset_methods),
            "presets16": g(f"b{p.preset_block16}_presets_t{p.preset_text_tokens16}", b16, sol,
                           p.preset_methods),
            "cand_solutions": g(f"b{p.block}_candidates_solutions", b1, sol, _cand_nll(p)),
            "cand_generated": g(f"b{p.block}_candidates_generated", b1, gen, _cand_nll(p))}


def _cand_nll(p: Profile) -> tuple:
    """Priority 7's methods: the candidates with the baselines their checks compare against."""
    return tuple(dict.fromkeys(("default", "recent", "random", *p.cand_methods)))


# fidelity groups of each priority (3, 5, 6: agreement)
ROLES = {1: ("solutions", "generated", "tuning"), 2: ("solutions2", "generated2"),
         4: ("presets", "presets16"), 7: ("cand_solutions", "cand_generated")}


def _cells(results: str, name: str) -> str:
    """Cells beside the results when those are not in the repository's results/."""
    return "" if results == "results" else f" --cells-dir {results}/cells/{name}"


def test_sources(p: Profile, results: str) -> str:
    """Records of the block-size test texts (the tuning texts exclude them)."""
    return f"{results}/fidelity_b{p.block}_test_sources{p.suffix}.json"


def _agreement_flags(p: Profile, problems: int, methods, skip: int = 0) -> str:
    return (f"--model {p.model} --device {p.device} --dtype {p.dtype} --no-grade "
            f"--num-problems {problems} --skip-problems {skip} --block-size {p.agree_block} "
            f"--budgets {' '.join(map(str, p.agree_budgets))} "
            f"--max-tokens {p.agree_max_tokens} --methods {' '.join(methods)}")


def agreement_groups(p: Profile, results: str, priorities=(3,)) -> dict:
    """name -> flags of `bench agreement` for the agreement priorities asked."""
    runs = []
    if 3 in priorities:
        common = _agreement_flags(p, p.agree_problems, p.agree_methods)
        runs += [("gsm8k_greedy", f"{common} --task gsm8k"),
                 ("math500_greedy", f"{common} --task math500"),
                 ("gsm8k_t06", f"{common} --task gsm8k --temperature 0.6 "
                               f"--samples {p.agree_samples}")]
    if 5 in priorities:
        runs.append(("math500_greedy_all", _agreement_flags(p, p.all_problems, p.all_methods)
                     + " --task math500"))
    if 6 in priorities:
        runs += [("gsm8k_tune", _agreement_flags(p, p.tune_problems, p.cand_methods,
                                                 skip=p.agree_problems) + " --task gsm8k"),
                 ("math500_candidates", _agreement_flags(p, p.all_problems, p.cand_methods)
                  + " --task math500")]
    return {name: f"{flags} --out {results}/agreement_{name}{p.suffix}"
                  f"{_cells(results, f'agreement_{name}{p.suffix}')}" for name, flags in runs}


def _mem_gb(p: Profile, tokens: int) -> float:
    return tokens * KV_BYTES_PER_TOKEN.get(p.dtype, 4 * 23040) / 1e9 + 3.0


def tasks(p: Profile, results: str, priorities=(1, 2, 3)) -> list[Task]:
    fg = fidelity_groups(p, results)
    n1 = {"solutions": p.num_solution_texts, "generated": p.num_generated_texts,
          "tuning": p.num_tuning_texts}
    roles = [r for r in fg if any(r in ROLES.get(q, ()) for q in priorities)]
    if "tuning" in roles and "solutions" not in roles:  # tuning excludes the test texts
        roles.insert(0, "solutions")
    sources = {roles.index("solutions"): test_sources(p, results)} if "solutions" in roles else {}
    out = [] if not roles else [
        Task("texts", "scripts.fidelity.batch:build_texts", priority=0, kind="texts",
             steps=p.solution_tokens, mem_gb=_mem_gb(p, 250 * (p.solution_tokens + 640)),
             kwargs=dict(groups=[fg[r] for r in roles], sources_file=sources))]

    def fid(name, groups, method, budget, prompt, block, prio, ntexts, tokens=p.text_tokens):
        steps = tokens - prompt
        kv = ntexts * ((tokens if method is None else budget) + 2 * block)
        out.append(Task(name, "scripts.fidelity.batch:fidelity_cell", priority=prio,
                        kind="fidelity", steps=steps, mem_gb=_mem_gb(p, kv), after=("texts",),
                        kwargs=dict(groups=[fg[g] for g in groups], method=method,
                                    budget=budget)))

    if 1 in priorities:
        every = ["solutions", "generated", "tuning"]
        fid(f"b{p.block} full", every, None, None, min(p.budgets), p.block, 1,
            sum(n1.values()))
        for m in p.test_methods + tuple(x for x in p.tune_methods if x not in p.test_methods):
            groups = [g for g in every if m in (p.tune_methods if g == "tuning"
                                                 else p.test_methods)]
            for B in p.budgets:
                fid(f"b{p.block} {m}@{B}", groups, m, B, B, p.block, 1,
                    sum(n1[g] for g in groups))
    if 2 in priorities:
        two = ["solutions2", "generated2"]
        n2 = p.num_solution_texts + p.num_generated_texts
        fid(f"b{p.block2} full", two, None, None, min(p.budgets2), p.block2, 2, n2)
        for m in p.methods2:
            for B in p.budgets2:
                fid(f"b{p.block2} {m}@{B}", two, m, B, B, p.block2, 2, n2)
    for prio, reqs, methods, label in ((3, p.agree_problems * (2 + p.agree_samples),
                                        p.agree_methods, "agree"),
                                       (5, p.all_problems, p.all_methods, "agree all"),
                                       (6, p.all_problems + p.tune_problems, p.cand_methods,
                                        "agree cand")):
        if prio not in priorities:
            continue
        ag = agreement_groups(p, results, (prio,))
        for m, B in [("full", None)] + [(m, B) for B in p.agree_budgets for m in methods]:
            # every request reserves the longest prompt (kv_tokens_per_request): MATH-500's is
            # about 1,450 tokens with the harness's template (a 500-problem default@512 cell
            # allocated 21.3 GiB of KV at float32 on the H200)
            per = 1500 + (p.agree_max_tokens if B is None else B) + 2 * p.agree_block
            out.append(Task(f"{label} {m}@{B}" if B else f"{label} full",
                            "scripts.fidelity.batch:agreement_cell", priority=prio, kind="agree",
                            steps=p.agree_max_tokens, mem_gb=_mem_gb(p, reqs * per),
                            kwargs=dict(groups=list(ag.values()), method=m, budget=B)))
    if 4 in priorities:
        for role, block, budgets, tokens in (
                ("presets", p.block, p.budgets, p.text_tokens),
                ("presets16", p.preset_block16, p.preset_budgets16, p.preset_text_tokens16)):
            n = p.num_solution_texts
            fid(f"{role} full", [role], None, None, min(budgets), block, 4, n, tokens)
            for m in p.preset_methods:
                for B in budgets:
                    fid(f"{role} {m}@{B}", [role], m, B, B, block, 4, n, tokens)
    if 7 in priorities:
        two = ["cand_solutions", "cand_generated"]
        n7 = p.num_solution_texts + p.num_generated_texts
        fid(f"cand b{p.block} full", two, None, None, min(p.budgets), p.block, 7, n7)
        for m in _cand_nll(p):
            for B in p.budgets:
                fid(f"cand b{p.block} {m}@{B}", two, m, B, B, p.block, 7, n7)
    return out
