"""Fit the decode kernel's waves (zipage/sim/decode_waves.py) to a calibration's raw grids,
and refit a calibration file's device models with them (``bench calibrate --decode-waves``,
on the CPU; a fresh ``bench calibrate`` does it at its end).

The two wave parameters are not linear: for every candidate (programs per SM k, saturating
programs M) the device models of all configs that run one kernel (one KV dtype) are fitted
as usual (non-negative least squares on relative error) and the candidate with the least
total squared error wins. M = 0 is the model without waves, so a grid that shows no wave
effect keeps the old fit. The profile (best error per k) is recorded: it says how sharply
the grid picks k.
"""
import numpy as np

from zipage.sim.calibration import device_seconds, row_knots
from zipage.sim.calibration_file import parse_key
from zipage.sim.cost_model import FORM, CostModel, fit_linear
from zipage.sim.decode_waves import DecodeWaves
from zipage.sim.features import StepFeatures

PROGRAMS_PER_SM = tuple(range(1, 9))
COARSE_STEP = 10  # M is searched on this grid, then to 1 around the best


def grid_points(grid: list[dict]) -> tuple[list[StepFeatures], list[float], tuple[int, ...]]:
    return ([StepFeatures(**s["features"]) for s in grid], [device_seconds(s) for s in grid],
            row_knots(grid))


def squared_error(grids: list[tuple], waves: DecodeWaves) -> float:
    """Sum over configs of the squared relative errors of their device fits."""
    total = 0.0
    for feats, secs, knots in grids:
        _, err = fit_linear(feats, secs, knots, waves=waves)
        total += err["rms_rel_error"] ** 2 * err["points"]
    return total


def fit_waves(grids: list[list[dict]], sms: int, kv_heads: int, max_num_seqs: int = 512,
              per_sm=PROGRAMS_PER_SM) -> tuple[DecodeWaves, dict]:
    """The (k, M) with the least total squared error over these configs' grids (the grids of
    one kernel, timed on a runner with ``max_num_seqs``); the profile: for each k its best M
    and rms."""
    pts = [grid_points(g) for g in grids]
    n = sum(len(p[0]) for p in pts)

    def error(k: int, m: int) -> float:
        return squared_error(pts, DecodeWaves(sms, kv_heads, k, m, max_num_seqs))

    profile = {}
    for k in per_sm:
        coarse = min((error(k, m), m) for m in range(0, sms * k + 1, COARSE_STEP))
        lo, hi = max(0, coarse[1] - COARSE_STEP), min(sms * k, coarse[1] + COARSE_STEP)
        best = min((error(k, m), m) for m in range(lo, hi + 1))
        profile[k] = {"saturating_programs": best[1], "rms_rel_error": float(np.sqrt(best[0] / n))}
    k = min(profile, key=lambda j: (profile[j]["rms_rel_error"], j))
    waves = DecodeWaves(sms, kv_heads, k, profile[k]["saturating_programs"], max_num_seqs)
    no_waves = float(np.sqrt(error(1, 0) / n))
    return waves, {"profile": profile, "rms_rel_error": profile[k]["rms_rel_error"],
                   "rms_rel_error_without_waves": no_waves, "points": n}


def refit_device(model: dict, grid: list[dict], waves: DecodeWaves) -> dict:
    """A config's model (dict) with its device part refitted to its grid with these waves;
    host phases and the rest of meta unchanged."""
    cost = CostModel.from_dict(model)
    feats, secs, knots = grid_points(grid)
    device, err = fit_linear(feats, secs, knots, waves=waves)
    fit = dict(cost.meta.get("fit", {}))
    if cost.device.waves is None:  # the first wave fit: keep the fit it replaces
        fit["device_without_waves"] = fit.get("device")
    fit["device"] = err
    out = CostModel(device, cost.host, dict(cost.meta, fit=fit)).to_dict()
    out["form"] = FORM
    return out


def refit_waves(data: dict, log=print) -> None:
    """Every config of a calibration file (dict, in place) with a raw grid gets waves fitted
    jointly with the other configs of its KV dtype, and its device model refitted with them.
    Configs refitted to traces are left alone (their device fit is not the grid's)."""
    sms = data.get("environment", {}).get("sm_count")
    kv_heads = data.get("model_shape", {}).get("num_kv_heads")
    if not sms or not kv_heads:
        raise ValueError("the calibration records no SM count (environment.sm_count) or model "
                         "shape (model_shape.num_kv_heads): the decode waves need both")
    max_num_seqs = data.get("workload", {}).get("max_num_seqs", 512)
    groups: dict[str, list[str]] = {}
    for key, model in data["models"].items():
        if model.get("meta", {}).get("fitted_to") == "traces":
            log(f"== {key}: refitted to traces, left as it is")
        elif data.get("raw", {}).get(key, {}).get("grid"):
            groups.setdefault(parse_key(key)[2], []).append(key)
        else:
            log(f"== {key}: no raw grid, no decode waves")
    for kv_dtype, keys in groups.items():
        grids = [data["raw"][k]["grid"] for k in keys]
        waves, fit = fit_waves(grids, sms, kv_heads, max_num_seqs)
        profile = ", ".join(f"k={k}: {p['rms_rel_error']:.2%}" for k, p in fit["profile"].items())
        log(f"== decode waves of the {kv_dtype} kernel ({', '.join(keys)}): {waves.describe()}; "
            f"device rms {fit['rms_rel_error']:.2%} over {fit['points']} grid points (without "
            f"waves {fit['rms_rel_error_without_waves']:.2%}); best rms per programs per SM: "
            f"{profile}")
        for key in keys:
            data["models"][key] = refit_device(data["models"][key], data["raw"][key]["grid"],
                                               waves)
            data["models"][key]["meta"]["decode_waves_fit"] = fit
            err = data["models"][key]["meta"]["fit"]["device"]
            log(f"   {key}: device rms {err['rms_rel_error']:.2%}, max "
                f"{err['max_abs_rel_error']:.2%}")
