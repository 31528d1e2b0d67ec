"""Cells shared by several runs (scripts/fidelity/batch.py) are found by each run's own
`python -m scripts.bench fidelity ... --report-only`; the plan covers what issue 13 asks."""
import pytest

from scripts.fidelity import nll as fidelity, batch as fb, engine as fe
from scripts.fidelity import group as fg
from scripts.fidelity import plan as fp

COMMON = "--device cpu --dtype float32 --text-tokens 12 --block-size 16 --budgets 32 64"


def _group(tmp_path, name, seed, n):
    flags = (f"{COMMON} --num-texts {n} --seed {seed} --out {tmp_path}/{name} "
             f"--cells-dir {tmp_path}/cells/{name} --methods default recent --text-tokens 100")
    args = fb.fidelity_args(flags)
    texts = [[seed * 1000 + 10 * i + j for j in range(100)] for i in range(n)]
    fg.store(args).save("texts", fg.texts_key(args, "cpu"), texts=texts,
                        sources=[[f"r{seed}-{i}"] for i in range(n)])
    return flags


def test_one_engine_serves_every_run_and_each_run_reports_its_own_share(tmp_path, monkeypatch):
    calls = []

    def fake_engine(model, texts, prompt, budget, block, options, device, dtype):
        calls.append((len(texts), prompt, budget, options.get("score")))
        lp = -1.0 if budget is None else (-1.5 if options.get("score") == "recent" else -1.25)
        return ([dict(logprobs=[lp] * (len(t) - prompt), argmax=t[prompt:], num_compressions=2,
                      peak_kv_tokens=budget or len(t)) for t in texts], dict(wall_time_s=0.0))

    monkeypatch.setattr(fe, "run_engine", fake_engine)
    a, b = _group(tmp_path, "run_a", 1, 2), _group(tmp_path, "run_b", 2, 3)
    assert fb.fidelity_cell([a, b], None)["texts"] == 5
    for m in ("default", "recent"):
        for B in (32, 64):
            fb.fidelity_cell([a, b], m, B)
    assert calls[0] == (5, 32, None, None)  # Full KV from the smallest prompt
    assert len(calls) == 5 and all(c[0] == 5 for c in calls)
    assert fb.fidelity_cell([a, b], "default", 32) == dict(ran=0)  # finished: not rerun

    args = fb.parse(fidelity, a + " --report-only")
    assert fidelity.main(args) == 0
    import json
    with open(f"{tmp_path}/run_a.json") as f:
        res = json.load(f)
    assert res["summaries"]["default@32"]["delta_nll"] == pytest.approx(0.25)
    assert res["summaries"]["recent@64"]["delta_nll"] == pytest.approx(0.5)
    assert res["paired"]["default|recent@64"]["mean"] == pytest.approx(-0.25)
    assert len(res["summaries"]["default@32"]["delta_nll_per_text"]) == 2  # run a's texts only


def test_runs_that_differ_in_engine_settings_are_not_batched(tmp_path, monkeypatch):
    monkeypatch.setattr(fe, "run_engine", lambda *a, **k: pytest.fail("must not run"))
    a = _group(tmp_path, "run_a", 1, 1)
    b = _group(tmp_path, "run_b", 2, 1).replace("--device cpu", "--device cpu --window 8")
    with pytest.raises(ValueError, match="must share window"):
        fb.fidelity_cell([a, b], "default", 32)
    with pytest.raises(ValueError, match="not one of"):
        fb.fidelity_cell([a], "default", 48)


def test_the_h200_plan_covers_issue_13():
    p = fp.PROFILES["h200"]
    groups = fp.fidelity_groups(p, "results")
    tasks = fp.tasks(p, "results")
    parsed = {r: fb.parse(fidelity, f) for r, f in groups.items()}
    for role in ("solutions", "generated", "tuning"):
        a = parsed[role]
        assert (a.block_size, a.budgets, a.text_tokens, a.device, a.dtype) == (
            256, [1024, 2048], 4096, "cuda", "float32")
    assert parsed["generated"].text_source == "generated"
    assert fp.test_sources(p, "results") in parsed["tuning"].exclude_sources
    b64 = parsed["solutions2"]
    assert (b64.block_size, b64.budgets) == (64, [512, 1024, 2048])
    required = {"default", "paper", "attn", "attn_global", "recent", "random", *fp.SWEEP}
    p1 = {(t.kwargs["method"], t.kwargs["budget"]): t for t in tasks if t.priority == 1}
    assert {(m, B) for m in required for B in (1024, 2048)} <= set(p1)
    assert groups["tuning"] in p1["rw=0.5", 1024].kwargs["groups"]
    assert groups["tuning"] not in p1["recent", 1024].kwargs["groups"]
    assert groups["generated"] in p1["recent", 2048].kwargs["groups"]
    assert [t.priority for t in tasks] == sorted(t.priority for t in tasks)
    from scripts.fidelity import agreement
    for flags in fp.agreement_groups(p, "results").values():
        g = fb.parse(agreement, flags)
        assert g.max_tokens >= 1024 and g.block_size == 16 and g.budgets == [128, 256, 512]
        assert g.no_grade and "recent" in g.methods and "default" in g.methods


def test_the_h200_preset_plan_covers_issue_17():
    """Priority 4: every comparison preset next to the default, recent and random, at block
    256 (budgets 1024, 2048) and block 16 (128-512), with a Full-KV reference per block."""
    from zipage.compression.presets import COMPARISON
    p = fp.PROFILES["h200"]
    groups = fp.fidelity_groups(p, "results")
    tasks = fp.tasks(p, "results", priorities=[4])
    b256, b16 = (fb.parse(fidelity, groups[r]) for r in ("presets", "presets16"))
    assert (b256.block_size, b256.budgets, b256.text_tokens) == (256, [1024, 2048], 4096)
    assert (b16.block_size, b16.budgets) == (16, [128, 256, 512])
    assert b16.text_tokens >= 4 * max(b16.budgets)
    cells = {(tuple(t.kwargs["groups"]), t.kwargs["method"], t.kwargs["budget"])
             for t in tasks if t.kind == "fidelity"}
    for role, budgets in (("presets", (1024, 2048)), ("presets16", (128, 256, 512))):
        g = (groups[role],)
        assert (g, None, None) in cells
        assert {(g, m, B) for m in (*COMPARISON, "default", "recent", "random")
                for B in budgets} <= cells
    texts = next(t for t in tasks if t.kind == "texts")
    assert texts.kwargs["groups"] == [groups["presets"], groups["presets16"]]
    assert not texts.kwargs["sources_file"]  # no tuning run here: nothing to exclude


def test_the_candidate_plan_tunes_on_problems_the_test_runs_never_see():
    """Priority 6: GSM8K tuning problems follow priority 3's 100 in the same shuffle; MATH-500
    is every problem; priority 7 scores the same candidates at block 256 with the baselines."""
    from scripts.fidelity import agreement
    p = fp.PROFILES["h200"]
    groups = {n: fb.parse(agreement, f) for n, f in fp.agreement_groups(p, "results", (6,)).items()}
    tune, test = groups["gsm8k_tune"], groups["math500_candidates"]
    assert (tune.task, tune.skip_problems, tune.num_problems) == ("gsm8k", p.agree_problems, 200)
    assert (test.task, test.skip_problems, test.num_problems) == ("math500", 0, 500)
    for g in (tune, test):
        assert {"default", "recent", "attn_sinks", "attn_recent=0.25"} <= set(g.methods)
    tasks = fp.tasks(p, "results", priorities=[6, 7])
    agree = {(t.kwargs["method"], t.kwargs["budget"]) for t in tasks if t.priority == 6}
    assert agree == {("full", None)} | {(m, B) for m in p.cand_methods for B in (128, 256, 512)}
    nll = {(t.kwargs["method"], t.kwargs["budget"]) for t in tasks if t.priority == 7}
    assert {(m, B) for m in ("recent", "random", "attn_recent=0.25") for B in (1024, 2048)} <= nll
    assert (None, None) in nll


def test_model_config_and_tokenizer_are_read_once_per_process():
    fe.cache_model_loading()
    import zipage.llm as zl
    assert zl.load_hf_config("qwen3-8b", None) is zl.load_hf_config("qwen3-8b", None)


def test_an_unknown_priority_is_rejected_before_any_work(capsys):
    from scripts import bench
    with pytest.raises(SystemExit) as e:
        bench.main(["fidelity-gpu", "--profile", "tiny", "--priorities", "8"])
    assert e.value.code == 2 and "invalid choice: 8" in capsys.readouterr().err
