"""Evidence for the decode waves (zipage/sim/decode_waves.py): the traced decode steps of
measured runs, grouped by batch size, with the cost per KV token they show and the device
time two cost models give them (one without waves, one with).

    python -m zipage.sim.wave_evidence --cost OLD.json --waves NEW.json TRACE.json.gz ...

Per batch size: the launch's programs with work N (rows x KV heads x splits of the padded
batch), steps, mean context, the median measured step, the median ns per KV token
((measured - the model's time without its KV term) / KV tokens, with the wave model's
table T(rows)), and model / measured device time summed over those steps for each model.
Only decode-only steps of at least ``--min-kv`` KV tokens count: below it the KV term is
too small a part of the step to show its cost per token.
"""
import argparse
import statistics
from collections import defaultdict

from zipage.sim.calibration_file import Calibration
from zipage.sim.trace import features_of, read_traces


def rows_table(records: list[dict], old, new, min_kv: int, context_bin: int = 0) -> list[dict]:
    """``old`` and ``new``: cost models bound to the traced engine (``for_engine``);
    ``context_bin`` > 0 also splits each batch size by mean context (bins of that many
    tokens)."""
    groups = defaultdict(list)
    for r in records:
        f = features_of(r)
        if f.is_mixed or f.compressions or r.get("device_s") is None or f.kv_read_tokens < min_kv:
            continue
        ctx = f.kv_read_tokens // f.decode_rows
        groups[(f.decode_rows, ctx // context_bin if context_bin else 0)].append(
            (f, r["device_s"]))
    out = []
    for (rows, _), steps in sorted(groups.items()):
        kv_coef = new.device.coefficients.get("kv_read_per_mtoken", 0.0)

        def per_token(f, d):
            without_kv = new.device_s(f) - kv_coef * new.device.terms(f)["kv_read_per_mtoken"]
            return (d - without_kv) / f.kv_read_tokens * 1e9

        measured = sum(d for _, d in steps)
        out.append(dict(
            rows=rows, programs=new.device.waves.programs(steps[0][0]), steps=len(steps),
            mean_context=statistics.mean(f.kv_read_tokens / rows for f, _ in steps),
            measured_ms=1e3 * statistics.median(d for _, d in steps),
            ns_per_token=statistics.median(per_token(f, d) for f, d in steps),
            waste=new.device.waves.waste(steps[0][0]),
            old_ratio=sum(old.device_s(f) for f, _ in steps) / measured,
            new_ratio=sum(new.device_s(f) for f, _ in steps) / measured))
    return out


def markdown(table: list[dict], min_steps: int = 1) -> str:
    lines = ["| rows | programs N | steps | mean context | measured ms | ns per KV token | "
             "waste W(N) | model / measured, no waves | with waves |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t in table:
        if t["steps"] >= min_steps:
            lines.append(f"| {t['rows']} | {t['programs']} | {t['steps']} | "
                         f"{t['mean_context']:,.0f} | {t['measured_ms']:.2f} | "
                         f"{t['ns_per_token']:.1f} | {t['waste']:.3f} | {t['old_ratio']:.3f} | "
                         f"{t['new_ratio']:.3f} |")
    return "\n".join(lines) + "\n"


# A GPU probe that tells the hypotheses apart (fullkv/b256; `bench calibrate --rows ... --only
# ...`): batch sizes the default grid lacks, on both sides of the wave edge N = 660.
PROBE_ROWS = (40, 44, 48, 56, 80, 88, 96, 112)
PROBE_POINTS = ("decode 40x16384", "decode 44x16384", "decode 48x16384", "decode 56x4096",
                "decode 80x4096", "decode 88x4096", "decode 96x4096", "decode 112x4096")


def kv_per_row_model(grid: list[dict]):
    """The alternative the grid alone cannot reject: the cost per KV token as a table over
    the batch size (interpolated like T(rows)), no waves. Returns f -> device seconds."""
    import numpy as np

    from zipage.sim.calibration import device_seconds, row_knots
    from zipage.sim.cost_model import DEVICE_TERMS, hat_weights, nnls
    from zipage.sim.features import StepFeatures
    knots = row_knots(grid)
    others = [t for t in DEVICE_TERMS if t != "kv_read_per_mtoken"]

    def row(f):
        w = hat_weights(f.rows, knots)
        return w + [x * f.kv_read_tokens / 1e6 for x in w] + [DEVICE_TERMS[t](f) for t in others]

    feats = [StepFeatures(**s["features"]) for s in grid]
    y = np.array([device_seconds(s) for s in grid])
    A = np.array([row(f) for f in feats])
    used = np.abs(A).sum(axis=0) > 0
    x = np.zeros(A.shape[1])
    x[used] = nnls(A[:, used] / y[:, None], np.ones(len(y)))
    return lambda f: float(np.dot(row(f), x))


def probe_predictions(old_path: str, waves_path: str, key: str = "fullkv/b256") -> list[dict]:
    """Predicted device ms of each probe point under: no waves (the calibration as it is),
    the kv-per-row table fitted to the same grid, and the decode waves."""
    from zipage.sim.calibration_file import parse_key
    from zipage.sim.features import step_features
    from zipage.sim.synthetic import calibration_grid, synthetic_step
    from zipage.sampling_params import SamplingParams
    old_cal, new_cal = Calibration(old_path), Calibration(waves_path)
    engine, block, kv_dtype = parse_key(key)
    raw = old_cal.data["raw"][key]
    pool, max_rows = raw["memory"]["num_blocks"] * block, 512
    old = old_cal.cost(engine, block, kv_dtype).for_engine(max_rows, False)
    new = new_cal.cost(engine, block, kv_dtype).for_engine(max_rows, False)
    per_row = kv_per_row_model(raw["grid"])
    points = calibration_grid(False, block, None, pool, max_rows, 8192, 32768 + 128,
                              PROBE_ROWS)
    out = []
    for name in PROBE_POINTS:
        p = next(q for q in points if q.name == name)
        f = step_features(synthetic_step(p, block, raw["memory"]["num_blocks"], None, 0,
                                         SamplingParams(temperature=0.6)))
        out.append(dict(point=name, programs=new.device.waves.programs(f),
                        waste=new.device.waves.waste(f), kv_tokens=f.kv_read_tokens,
                        no_waves_ms=1e3 * old.device_s(f), kv_per_row_ms=1e3 * per_row(f),
                        waves_ms=1e3 * new.device_s(f)))
    return out


HYPOTHESES = {"no_waves_ms": "no waves", "kv_per_row_ms": "kv cost per row", "waves_ms": "waves"}


def check_probe(predictions: list[dict], probe: dict, key: str = "fullkv/b256") -> str:
    """Markdown: each probe point measured (a `calibrate --only` file) against each
    hypothesis' prediction, and each hypothesis' rms error."""
    from zipage.sim.calibration import device_seconds
    measured = {g["name"]: 1e3 * device_seconds(g) for g in probe["raw"][key]["grid"]}
    lines = ["| point | programs | measured ms | " + " | ".join(HYPOTHESES.values()) + " |",
             "|---|---|---|" + "---|" * len(HYPOTHESES)]
    errors = {h: [] for h in HYPOTHESES}
    for p in predictions:
        m = measured.get(p["point"])
        if m is None:
            continue
        cells = []
        for h in HYPOTHESES:
            errors[h].append(p[h] / m - 1)
            cells.append(f"{p[h]:.2f} ({100 * errors[h][-1]:+.1f}%)")
        lines.append(f"| {p['point']} | {p['programs']} | {m:.2f} | " + " | ".join(cells) + " |")
    rms = [f"{name} {100 * (sum(e * e for e in errors[h]) / max(len(errors[h]), 1)) ** 0.5:.1f}%"
           for h, name in HYPOTHESES.items()]
    return "\n".join(lines) + "\n\nrms error: " + ", ".join(rms) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("traces", nargs="*")
    p.add_argument("--cost", required=True, help="calibration without decode waves")
    p.add_argument("--waves", required=True, help="the same calibration with decode waves")
    p.add_argument("--engine", default="fullkv")
    p.add_argument("--min-kv", type=int, default=100_000)
    p.add_argument("--min-steps", type=int, default=20)
    p.add_argument("--context-bin", type=int, default=0,
                   help="also split each batch size by mean context (bins of this many tokens)")
    p.add_argument("--write-probe", metavar="OUT", help="write each hypothesis' prediction of "
                   "the probe points (before the probe runs)")
    p.add_argument("--check-probe", nargs=2, metavar=("PREDICTIONS", "PROBE"),
                   help="compare a --write-probe file with the measured probe")
    a = p.parse_args(argv)
    if a.write_probe:
        import json
        from pathlib import Path
        preds = probe_predictions(a.cost, a.waves)
        Path(a.write_probe).write_text(json.dumps({
            "probe": "bench calibrate --configs fullkv/b256 --rows " + " ".join(
                map(str, PROBE_ROWS)) + " --only " + " ".join(f'"{n}"' for n in PROBE_POINTS),
            "no_waves": a.cost, "waves": a.waves, "predictions": preds}, indent=1) + "\n")
        print(f"== probe predictions written to {a.write_probe}")
    if a.check_probe:
        import json
        from pathlib import Path
        preds, probe = (json.loads(Path(x).read_text()) for x in a.check_probe)
        print(check_probe(preds["predictions"], probe))
    old_cal, new_cal = Calibration(a.cost), Calibration(a.waves)
    for path in a.traces:
        trace = read_traces(path).get(a.engine)
        if not trace:
            continue
        o = trace["options"]
        bind = dict(max_num_seqs=o.get("max_num_seqs", 512),
                    enforce_eager=o.get("enforce_eager", False))
        key = (a.engine, o.get("block_size", 256), o.get("kv_cache_dtype", "auto"))
        old = old_cal.cost(*key).for_engine(**bind)
        new = new_cal.cost(*key).for_engine(**bind)
        if new.device.waves is None:
            raise SystemExit(f"{a.waves} has no decode waves (bench calibrate --decode-waves)")
        print(f"\n{path} ({a.engine}, block {key[1]}, max_num_seqs {bind['max_num_seqs']})\n")
        print(markdown(rows_table(trace["records"], old, new, a.min_kv, a.context_bin),
                       a.min_steps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
