"""What the fidelity-domains run and its report share: the texts of every domain in one list
(an engine run forces them all) and the key of each cell (scripts/fidelity/domains.py)."""
import hashlib
import json

from scripts.fidelity import methods as fm

SPLITS = ("tuning", "test")


def flat_texts(texts: dict) -> tuple[list[list[int]], list[tuple[str, str]]]:
    """Every text in one list (an engine run forces them all) and its (domain, split)."""
    ids, where = [], []
    for domain, by_split in texts.items():
        for split in SPLITS:
            for t in by_split.get(split, []):
                ids.append(t["ids"])
                where.append((domain, split))
    return ids, where


def text_sha(ids) -> str:
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()[:16]


def cell_key(settings: dict, method: str | None, budget: int | None) -> dict:
    s = settings
    options = (None if method is None else
               fm.engine_options(method, s["window"]))
    return dict(method=method or "full_kv", options=options, budget=budget,
                block_size=s["block_size"], prompt_tokens=min(s["budgets"]) if budget is None
                else budget, model=s["model"], texts=s["text_sha"], device=s["device"],
                dtype=s["dtype"])
