"""Refit only the host phases outside the runner (``schedule``: the scheduler before a
launch; ``post``: applying a step's results) of a calibration's configs to the steps of a
measured run (``bench calibrate --host-from-trace``); device, ``launch`` and ``start`` stay
the grid's.

Why only these two: the grid times ``launch`` and ``start`` on the real runner at each
block size, but ``schedule`` and ``post`` on a SimRunner loop (the same Python without a
model), which under-counts the real engine's. A trace times them in the real engine. They
are pure-Python scheduler and result work, the same code for every block size of an engine,
whose cost the host model splits into a per-step base, per-row, per-block-table-entry,
per-prefill-token, per-compression and mixed-step terms: a trace of one engine at one block
size therefore carries over to that engine's other block sizes through the same terms (a
larger block only means fewer table entries per row). A term no traced step exercises keeps
the base's coefficient. The refitted configs record the traced run's options: validation
marks that run in-sample.
"""
from zipage.sim.cost_model import CostModel
from zipage.sim.refit import fit_traced_phase
from zipage.sim.trace import features_of

OUTSIDE_RUNNER = ("schedule", "post")


def refit_host(base: CostModel, traces: list[dict],
               phases: tuple[str, ...] = OUTSIDE_RUNNER) -> CostModel:
    """``traces``: [{"path", "options", "records"}] of one engine (any block size)."""
    records = [r for t in traces for r in t["records"]]
    if not records:
        raise ValueError("the traces hold no steps")
    feats = [features_of(r) for r in records]
    host, errors = dict(base.host), {}
    for phase in phases:
        host[phase], errors[f"{phase}_trace"] = fit_traced_phase(base.host[phase], phase, feats,
                                                                 records)
    meta = {**base.meta, "fit": {**base.meta.get("fit", {}), **errors},
            "host_fitted_to": [t["path"] for t in traces], "host_phases_fitted": list(phases),
            "fitted_options": base.meta.get("fitted_options", []) + [t["options"]
                                                                     for t in traces]}
    return CostModel(base.device, host, meta)

