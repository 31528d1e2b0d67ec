"""Long texts for teacher forcing: concatenated MATH-500 problems with their human solutions,
or with SmolLM2's own sampled solutions (its reasoning style)."""
import gc
import json
import random

from zipage import LLM, SamplingParams

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def record_id(record: dict) -> str:
    return record.get("id") or record.get("unique_id")


def load_records(dataset: str, seed: int, exclude=frozenset()) -> list[dict]:
    """Dataset rows shuffled with `seed`, without those whose id is in `exclude`."""
    with open(dataset) as f:
        records = [json.loads(line) for line in f if line.strip()]
    records = [r for r in records if record_id(r) not in exclude]
    random.Random(seed).shuffle(records)
    return records


def concat_texts(tokenizer, records: list[dict], num_texts: int, num_tokens: int, source: str):
    """`num_texts` disjoint token sequences of exactly `num_tokens` tokens, each a run of
    "Problem: ... Solution: ..." records taken in order; (texts, record ids per text)."""
    texts, sources, it = [], [], iter(records)
    for _ in range(num_texts):
        parts, ids, used = [], [], []
        while len(ids) < num_tokens:
            try:
                r = next(it)
            except StopIteration:
                raise ValueError(f"{source} has too few records for {num_texts} x {num_tokens} "
                                 f"tokens") from None
            parts.append(f"Problem: {r['problem'].strip()}\nSolution: {r['solution'].strip()}\n\n")
            used.append(record_id(r))
            ids = tokenizer("".join(parts), add_special_tokens=False).input_ids
        texts.append(ids[:num_tokens])
        sources.append(used)
    return texts, sources


def build_texts(tokenizer, dataset: str, num_texts: int, num_tokens: int, seed: int,
                exclude=frozenset()):
    """Texts of problems and their human solutions (records shuffled with `seed`; records
    whose id is in `exclude` are skipped, e.g. a tuning run's)."""
    return concat_texts(tokenizer, load_records(dataset, seed, exclude), num_texts, num_tokens,
                        dataset)


def build_generated_texts(model: str, tokenizer, dataset: str, num_texts: int, num_tokens: int,
                          seed: int, exclude=frozenset(), max_solution_tokens: int = 512,
                          device: str = "auto"):
    """Like build_texts, with the model's own solutions: each problem is asked in the chat
    template with the paper's instruction, answered by the model (Full KV, T 0.6, seeded),
    and the texts concatenate "Problem: ... Solution: <its answer>" records."""
    records = load_records(dataset, seed, exclude)
    picked = records[:max(8, num_texts * num_tokens // 150)]  # SmolLM2 records: ~300 tokens
    prompts = [tokenizer.apply_chat_template(
        [{"role": "user", "content": f"{r['problem'].strip()}\n{INSTRUCTION}"}], tokenize=False,
        add_generation_prompt=True) for r in picked]
    llm = LLM(model, device=device, block_size=16, max_num_seqs=len(prompts),
              kv_cache_tokens=len(prompts) * (max_solution_tokens + 640))
    outs = llm.generate(prompts, SamplingParams(temperature=0.6, seed=seed,
                                                max_tokens=max_solution_tokens), use_tqdm=False)
    llm.shutdown()
    del llm
    gc.collect()
    solved = [dict(r, solution=o.outputs[0].text) for r, o in zip(picked, outs) if o.outputs]
    random.Random(0).shuffle(solved)  # the order results/fidelity_smollm2_generated.* used
    return concat_texts(tokenizer, solved, num_texts, num_tokens, f"{dataset} (generated)")
