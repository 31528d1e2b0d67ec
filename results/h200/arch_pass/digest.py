"""Greedy SmolLM2 outputs digest (public API only; runs on the old and the new tree)."""
import hashlib, json, sys
from zipage import LLM, SamplingParams
prompts = [f"Question {i}: what is {i} * {i + 3}? Think step by step." for i in range(int(sys.argv[2]))]
out = {}
for name, opts in [("fullkv", {}), ("zipage_b128_bs16", dict(budget=128, block_size=16))]:
    llm = LLM("smollm2-135m", **opts, **({"compression": {"use_global_score": True, "use_pooling": True,
              "redundancy": "lightning", "redundancy_weight": 0.2}} if opts else {}))
    res = llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=int(sys.argv[3]), ignore_eos=True), use_tqdm=False)
    ids = [r.token_ids if hasattr(r, "token_ids") else r["token_ids"] for r in res]
    out[name] = hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]
    del llm
print(json.dumps(out)); json.dump(out, open(sys.argv[1], "w"))
