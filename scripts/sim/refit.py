"""`bench calibrate --merge`, `--add-start`, `--from-trace` and `--host-from-trace`: merge into
and refit an existing calibration file on the CPU (zipage/sim/merge.py, refit.py,
host_refit.py). --add-start fits the idle-start phase from the file's raw grid;
--from-trace refits each traced config (engine/bBLOCK) to its traced steps, with the grid of
the base config as the fallback. A traced config the file lacks (zipage/b32 when its grid
crashed) starts from the nearest block size of the same engine, which the model's meta
names. --merge copies configs calibrated in another call; --host-from-trace refits only the
host phases outside the runner. Together: merge, start phase, traces, host phases.
"""
import json
from pathlib import Path

from scripts import common as bc
from zipage.sim.calibration_file import config_key, nearest_config, parse_key
from zipage.sim.cost_model import CostModel
from zipage.sim.host_refit import refit_host
from zipage.sim.merge import merge_configs
from zipage.sim.refit import add_start, refit_from_traces
from zipage.sim.trace import read_traces
from zipage.sim.waves_fit import refit_waves


def traces_by(paths: list[str], key) -> dict[str, list[dict]]:
    """The engine traces of these files grouped by ``key(engine, trace)``; each trace gains
    its ``path``."""
    out: dict[str, list[dict]] = {}
    for path in paths:
        for engine, trace in read_traces(path).items():
            out.setdefault(key(engine, trace), []).append(dict(trace, path=path))
    return out


def traces_by_config(paths: list[str]) -> dict[str, list[dict]]:
    return traces_by(paths, lambda e, t: config_key(e, t["options"].get("block_size", 256),
                                                   t["options"].get("kv_cache_dtype", "auto")))


def refit(a) -> int:
    if not a.base or not a.out:
        raise SystemExit("--merge / --from-trace / --host-from-trace / --add-start / "
                         "--decode-waves need --base (a calibration file) and --out")
    data = json.loads(Path(a.base).read_text())
    merged = None
    for path in a.merge or []:
        try:
            merged = (merged or []) + merge_configs(data, json.loads(Path(path).read_text()),
                                                    path, note=a.merge_note, replace=a.replace)
        except ValueError as e:  # another GPU, a config the base has: the user's call to fix
            raise SystemExit(f"calibrate --merge: {e}") from None
    if a.add_start:
        add_start(data, keys=merged)  # with --merge: the merged configs only
        data["start_added"] = True
    for key, traces in traces_by_config(a.from_trace or []).items():
        engine, block, kv_dtype = parse_key(key)
        base_key = key if key in data["models"] else nearest_config(data["models"], engine,
                                                                    block, kv_dtype)
        if base_key is None:
            raise SystemExit(f"{a.base} has no {engine} model to refit with "
                             f"{[t['path'] for t in traces]}")
        base = CostModel.from_dict(data["models"][base_key])
        if "start" not in base.host:
            print(f"!! {base_key} has no start phase: synchronous runs will miss the device's "
                  f"idle start (add --add-start)")
        grid = data.get("raw", {}).get(base_key, {}).get("grid", [])
        model = refit_from_traces(base, grid, traces)
        model.meta.update(block_size=int(block), base_config=base_key)
        data["models"][key] = model.to_dict()
        fit = model.meta["fit"]
        grid_err = (f"; on the {base_key} grid rms {fit['device_grid']['rms_rel_error']:.1%}"
                    if "device_grid" in fit else "")
        print(f"== {key} refitted to {fit['device']['points']} traced steps (base {base_key}): "
              f"device rms {fit['device']['rms_rel_error']:.1%}, max "
              f"{fit['device']['max_abs_rel_error']:.1%}{grid_err}")
    if a.from_trace:
        data["refitted_from"] = a.from_trace
    if a.decode_waves:
        refit_waves(data)
    if a.host_from_trace:
        refit_host_phases(data, a.host_from_trace, a.host_engines, a.host_configs)
    bc.write_json(a.out, data)
    return 0


def refit_host_phases(data: dict, paths: list[str], engines: list[str],
                      configs: list[str] | None = None) -> None:
    """--host-from-trace: the schedule and post phases of every config (or of ``configs``) of
    each engine in ``engines``, refitted to that engine's traced steps (any block size:
    zipage/sim/host_refit.py)."""
    by_engine = traces_by(paths, lambda e, t: e)
    for engine in engines:
        traces = by_engine.get(engine)
        keys = [k for k in data["models"] if k.startswith(engine + "/b")
                and (configs is None or k in configs)]
        if not traces or not keys:
            raise SystemExit(f"--host-from-trace: no {engine} steps in {paths} or no {engine} "
                             f"config in the base")
        for key in keys:
            model = refit_host(CostModel.from_dict(data["models"][key]), traces)
            data["models"][key] = model.to_dict()
            fit = model.meta["fit"]
            print(f"== {key}: schedule and post refitted to {fit['schedule_trace']['points']} "
                  f"traced {engine} steps (block {traces[0]['options'].get('block_size')}): "
                  f"schedule rms {fit['schedule_trace']['rms_rel_error']:.1%}, post rms "
                  f"{fit['post_trace']['rms_rel_error']:.1%}")
    data["host_refitted_from"] = {"traces": paths, "engines": engines,
                                  **({"configs": configs} if configs else {})}
