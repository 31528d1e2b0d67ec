"""Refit a calibration file on the CPU, without a GPU:

* ``add_start``: the idle-start phase of every config, from the raw grid the file already
  holds (zipage/sim/calibration.py ``start_seconds``), for files written before it existed;
* ``refit_from_traces``: a cost model fitted to the steps of measured runs (``bench long
  --trace``), with the base config's grid as the fallback where the traces do not reach.

A trace covers the batch sizes and contexts its run held and nothing else: its device time
is fitted together with the base grid (each source weighing as much in total), the table
T(rows) gains a knot at every batch size the run held for a good share of its steps (GEMM
time is not linear between knots), and a host term no traced step exercises keeps the
base's coefficient. The start phase stays the grid's: an asynchronous run hides it.
Validating a run whose trace was fitted is circular; ``fitted_options`` lets validation
mark such runs in-sample.
"""
from collections import Counter

from zipage.sim.calibration import device_seconds, fit_start
from zipage.sim.cost_model import FORM, HOST_PHASES, CostModel, LinearModel, fit_error, \
    fit_linear
from zipage.sim.features import StepFeatures
from zipage.sim.trace import features_of

FREQUENT_SHARE = 0.05  # a batch size held by >= 5% of a trace's decode steps gets a knot


def add_start(data: dict, log=print, keys=None) -> None:
    """Fit the start phase of every config (or of ``keys``) of a calibration file (dict) from
    its raw grid, in place."""
    for key, model in data["models"].items():
        if keys is not None and key not in keys:
            continue
        grid = data.get("raw", {}).get(key, {}).get("grid")
        if not grid:
            log(f"== {key}: no raw grid, no start phase")
            continue
        if (fitted := fit_start(grid)) is None:
            log(f"== {key}: no grid point measures the idle start (need >= 3 back-to-back "
                f"repetitions, the first above their spread): no start phase")
            continue
        start, err = fitted
        model["host"]["start"] = start.coefficients
        model.setdefault("meta", {}).setdefault("fit", {})["start"] = err
        model["form"] = FORM
        log(f"== {key}: start phase fitted to {err['points']} grid points, rms "
            f"{err['rms_rel_error']:.1%}")


def frequent_rows(records: list[dict], share: float = FREQUENT_SHARE) -> set[int]:
    """Batch sizes of decode-only steps that make up at least ``share`` of them."""
    rows = Counter(r["decode_rows"] for r in records if r["prefill_rows"] == 0)
    total = sum(rows.values())
    return {n for n, c in rows.items() if n > 0 and c >= share * total}


def traced_device_s(record: dict, base: CostModel, synchronous: bool) -> float | None:
    """The busy-device time of a traced step: its CUDA events, less the idle start of a
    synchronous step (its events start when the host starts launching on an idle device)."""
    d = record.get("device_s")
    if d is None:
        return None
    d -= base.start_s(features_of(record)) if synchronous else 0.0
    return d if d > 0 else None


def refit_from_traces(base: CostModel, grid: list[dict], traces: list[dict]) -> CostModel:
    """``traces``: [{"path", "options", "records"}] of one engine and block size; ``grid``:
    the raw grid of the base config (may be empty)."""
    records = [r for t in traces for r in t["records"]]
    if not records:
        raise ValueError("the traces hold no steps")
    device_pts = [(features_of(r), d) for t in traces for r in t["records"]
                  if (d := traced_device_s(r, base, not t["options"].get("async_scheduling")))]
    grid_pts = [(StepFeatures(**s["features"]), device_seconds(s)) for s in grid]
    knots = tuple(sorted(set(base.device.row_knots) | set().union(
        *(frequent_rows(t["records"]) for t in traces))))
    pts = device_pts + grid_pts
    weights = [1 / len(device_pts)] * len(device_pts) + [1 / max(len(grid_pts), 1)] * len(grid_pts)
    waves = base.device.waves  # the grid's; the padded batches are the traced engine's
    if waves is not None:
        opts = traces[0]["options"]
        waves = waves.for_engine(opts.get("max_num_seqs", 512), opts.get("enforce_eager", False))
    device, _ = fit_linear([f for f, _ in pts], [s for _, s in pts], knots, weights, waves)
    keep_base_where_unexercised(device, base.device, [f for f, _ in pts])
    errors = {"device": fit_error(device, *zip(*device_pts))}
    if grid_pts:
        errors["device_grid"] = fit_error(device, *zip(*grid_pts))
    host = dict(base.host)  # start (and any other phase a trace cannot see) stays the base's
    feats = [features_of(r) for r in records]
    for phase in HOST_PHASES:
        host[phase], errors[phase] = fit_traced_phase(base.host[phase], phase, feats, records)
    meta = {**base.meta, "fit": {**base.meta.get("fit", {}), **errors}, "fitted_to": "traces",
            "traces": [t["path"] for t in traces],
            "fitted_options": [t["options"] for t in traces]}
    return CostModel(device, host, meta)


def fit_traced_phase(base: LinearModel, phase: str, feats: list[StepFeatures],
                     records: list[dict]) -> tuple[LinearModel, dict]:
    """One host phase fitted to traced steps (``feats`` are the ``records``' features), the
    base's coefficient kept for every term no step exercises."""
    model, err = fit_linear(feats, [max(r[f"{phase}_s"], 1e-7) for r in records])
    keep_base_where_unexercised(model, base, feats)
    return model, err


def keep_base_where_unexercised(model: LinearModel, base: LinearModel,
                                feats: list[StepFeatures]) -> None:
    exercised = {n for f in feats for n, v in model.terms(f).items() if v}
    for name, c in base.coefficients.items():
        if name in model.coefficients and name not in exercised:
            model.coefficients[name] = c
