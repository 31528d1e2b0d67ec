"""`bench long`'s workload: its default sizes, the tiny CPU smoke sizes that replace them, and
each request's output length (fixed, or drawn from a capped lognormal)."""
from zipage.sim.paper import length_distribution

DEFAULT_SIZES = dict(num_requests=128, prompt_len=128, output_len=8192, budget=2048,
                     block_size=256, kv_cache_tokens=None)
CPU_SMOKE_SIZES = dict(num_requests=4, prompt_len=16, output_len=96, budget=32, block_size=16,
                       kv_cache_tokens=512)


def resolve_sizes(a) -> None:
    """Fill the sizes not given (None) from DEFAULT_SIZES; with --cpu-smoke, the tiny CPU model's
    sizes replace every one, and each size given on the command line is named as replaced."""
    if not a.cpu_smoke:
        for k, v in DEFAULT_SIZES.items():
            if getattr(a, k) is None:
                setattr(a, k, v)
        return
    replaced = [f"--{k.replace('_', '-')} {getattr(a, k)} -> {v}"
                for k, v in CPU_SMOKE_SIZES.items()
                if getattr(a, k) is not None and getattr(a, k) != v]
    if replaced:
        print(f"--cpu-smoke uses its own sizes: {', '.join(replaced)}")
    for k, v in CPU_SMOKE_SIZES.items():
        setattr(a, k, v)


def draw_lengths(a) -> tuple[list[int], int | dict]:
    """Each request's output length, and the report's output_len: the fixed length, or the
    distribution with every drawn length (in request order: what `simulate --validate`
    replays)."""
    if a.mean_output_len is None:
        return [a.output_len] * a.num_requests, a.output_len
    try:
        dist = length_distribution(a.mean_output_len, a.output_len, a.sigma)
    except ValueError as e:
        raise SystemExit(f"--mean-output-len / --output-len (the cap) / --sigma: {e}") from None
    lengths = dist.draw(a.num_requests, a.seed)
    return lengths, dict(dist.describe(), lengths=lengths, drawn_mean=sum(lengths) / len(lengths))
