"""Step cost: device seconds and host seconds of one engine step, from its features
(zipage/sim/features.py). The form is ``FORM``: linear in its coefficients, every
coefficient >= 0, fitted by non-negative least squares on relative error.
"""
from dataclasses import dataclass, field, replace

import numpy as np

from zipage.sim.decode_waves import DecodeWaves
from zipage.sim.features import StepFeatures

# Linear device terms: (name, feature -> value). Scales keep the fit well conditioned.
DEVICE_TERMS = {
    "kv_read_per_mtoken": lambda f: f.kv_read_tokens / 1e6,
    "prefill_per_ktoken": lambda f: f.prefill_tokens / 1e3,
    "prefill_attention_per_g": lambda f: f.prefill_attention / 1e9,
    "mixed_step": lambda f: float(f.is_mixed),
    "compression_step": lambda f: float(f.compressions > 0),
    "per_compression": lambda f: float(f.compressions),
    "compressed_per_mtoken": lambda f: f.compressed_tokens / 1e6,
}
HOST_TERMS = {
    "base": lambda f: 1.0,
    "per_row": lambda f: float(f.rows),
    "table_per_kblock": lambda f: f.table_blocks / 1e3,
    "prefill_per_ktoken": lambda f: f.prefill_tokens / 1e3,
    "per_compression": lambda f: float(f.compressions),
    "mixed_step": lambda f: float(f.is_mixed),
}
HOST_PHASES = ("schedule", "launch", "post")
# "start": host seconds from the start of a launch until the device can begin the step (its
# inputs are built and copied first). Optional (older calibrations lack it: 0); it costs only
# when the device is idle at the launch, i.e. in synchronous scheduling.
OPTIONAL_HOST_PHASES = ("start",)
DEFAULT_ROW_KNOTS = (1, 8, 32, 64, 128, 256, 512)
FORM = """device_s = T(rows)                       # a table over rows, linearly interpolated
         + c_kv  * kv_read_tokens * W    # decode attention: KV bytes read; W >= 1 the waste
                                         # of the decode kernel's last wave (decode_waves.py;
                                         # 1 without decode_waves)
         + c_pf  * prefill_tokens        # prefill GEMM FLOPs
         + c_att * prefill_attention     # prefill attention FLOPs (q_len x context)
         + c_mix * [step has a prefill]  # eager forward (no CUDA graph): launch overhead
         + c_cs * [step compresses] + c_c * compressions + c_ct * compressed_tokens
host_s   = a + b*rows + c*table_blocks + d*prefill_tokens + e*compressions
           + f*[step has a prefill]      # one such model per phase: schedule, launch, post,
                                         # start (launch until the device can begin: <= launch)
T(rows) holds the weight reads, the GEMMs at that batch size, the LM head and sampling: a
table, because GEMM time is flat while weight reads dominate and grows once compute does."""


def hat_weights(x: float, knots) -> list[float]:
    """Weights of piecewise-linear interpolation at x over the knots: constant below the
    first knot, linear extrapolation above the last."""
    k = list(knots)
    w = [0.0] * len(k)
    if len(k) == 1 or x <= k[0]:
        w[0] = 1.0
        return w
    i = next((j for j in range(1, len(k)) if x <= k[j]), len(k) - 1)
    t = (x - k[i - 1]) / (k[i] - k[i - 1])
    w[i - 1], w[i] = 1.0 - t, t
    return w


def nnls(A: np.ndarray, b: np.ndarray, max_iter: int = 500) -> np.ndarray:
    """min ||A x - b|| subject to x >= 0 (Lawson and Hanson's active-set method), on
    unit-norm columns (terms of very different scales)."""
    norms = np.linalg.norm(A, axis=0)
    norms[norms == 0] = 1.0
    A = A / norms
    m, n = A.shape
    x, passive = np.zeros(n), np.zeros(n, dtype=bool)
    tol = 10 * np.finfo(float).eps * max(m, n) * max(np.linalg.norm(b), 1.0)
    for _ in range(max_iter):
        grad = A.T @ (b - A @ x)
        if passive.all() or grad[~passive].max(initial=-np.inf) <= tol:
            break
        passive[np.argmax(np.where(passive, -np.inf, grad))] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > 1e-12 * np.abs(x).max()
            x[~passive] = 0.0
    return x / norms


@dataclass
class LinearModel:
    """seconds = sum of coefficient x term value; a device model (with the table T(rows) over
    ``row_knots``, and the decode kernel's ``waves`` if calibrated) or a host model
    (``row_knots`` empty)."""
    coefficients: dict[str, float]
    row_knots: tuple[int, ...] = ()
    waves: DecodeWaves | None = None

    def terms(self, f: StepFeatures) -> dict[str, float]:
        if not self.row_knots:
            return {name: fn(f) for name, fn in HOST_TERMS.items()}
        weights = hat_weights(f.rows, self.row_knots)
        values = {f"rows@{k}": w for k, w in zip(self.row_knots, weights)}
        values.update({name: fn(f) for name, fn in DEVICE_TERMS.items()})
        if self.waves is not None:
            values["kv_read_per_mtoken"] *= self.waves.waste(f)
        return values

    def __call__(self, f: StepFeatures) -> float:
        values = self.terms(f)
        return sum(c * values[name] for name, c in self.coefficients.items())


def fit_linear(features: list[StepFeatures], seconds: list[float],
               row_knots: tuple[int, ...] = (), weights: list[float] | None = None,
               waves: DecodeWaves | None = None) -> tuple[LinearModel, dict]:
    """Non-negative fit on relative error (every step counts alike, short or long, unless
    ``weights`` scale a point's squared error). Returns the model and its fit error on these
    points."""
    if not features:
        raise ValueError("no measured steps to fit")
    probe = LinearModel({}, tuple(row_knots), waves)
    names = list(probe.terms(features[0]))
    A = np.array([[probe.terms(f)[n] for n in names] for f in features])
    y = np.asarray(seconds, dtype=float)
    if (y <= 0).any():
        raise ValueError("measured step times must be positive")
    used = np.abs(A).sum(axis=0) > 0  # a term no point exercises stays 0
    x = np.zeros(len(names))
    w = np.sqrt(np.asarray(weights, dtype=float)) if weights is not None else np.ones(len(y))
    x[used] = nnls(A[:, used] * (w / y)[:, None], w)
    model = LinearModel(dict(zip(names, map(float, x))), tuple(row_knots), waves)
    return model, fit_error(model, features, seconds)


def fit_error(model, features: list[StepFeatures], seconds: list[float]) -> dict:
    rel = [(model(f) - s) / s for f, s in zip(features, seconds)]
    return {"points": len(rel), "rms_rel_error": float(np.sqrt(np.mean(np.square(rel)))),
            "max_abs_rel_error": float(np.max(np.abs(rel))),
            "mean_rel_error": float(np.mean(rel))}


@dataclass
class CostModel:
    """Device model plus one host model per phase; see the module docstring."""
    device: LinearModel
    host: dict[str, LinearModel]  # "schedule" (before the launch), "launch", "post", "start"
    meta: dict = field(default_factory=dict)  # gpu, model, engine, fit errors, ...

    def device_s(self, f: StepFeatures) -> float:
        return self.device(f)

    def host_s(self, phase: str, f: StepFeatures) -> float:
        if phase in OPTIONAL_HOST_PHASES and phase not in self.host:
            return 0.0
        return self.host[phase](f)

    def for_engine(self, max_num_seqs: int, enforce_eager: bool) -> "CostModel":
        """This model for an engine with these options (its CUDA-graph batch sizes decide
        the decode kernel's waves); the same model if it has no waves."""
        if self.device.waves is None:
            return self
        device = replace(self.device, waves=self.device.waves.for_engine(max_num_seqs,
                                                                          enforce_eager))
        return CostModel(device, self.host, self.meta)

    def start_s(self, f: StepFeatures) -> float:
        """Idle device time at the start of a step launched on an idle device: the start
        phase, never more than the launch itself."""
        return min(self.host_s("start", f), self.host_s("launch", f))

    def to_dict(self) -> dict:
        waves = {} if self.device.waves is None else {"decode_waves": self.device.waves.to_dict()}
        return {"form": FORM, "row_knots": list(self.device.row_knots),
                "device": self.device.coefficients, **waves,
                "host": {p: m.coefficients for p, m in self.host.items()}, "meta": self.meta}

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        waves = DecodeWaves.from_dict(d["decode_waves"]) if "decode_waves" in d else None
        device = LinearModel(dict(d["device"]), tuple(d["row_knots"]), waves)
        _check_terms(device.coefficients, device.terms(StepFeatures()), "device")
        unknown = sorted(set(d["host"]) - set(HOST_PHASES) - set(OPTIONAL_HOST_PHASES))
        if unknown:
            raise ValueError(f"cost model: unknown host phases {unknown} "
                             f"(known: {list(HOST_PHASES + OPTIONAL_HOST_PHASES)})")
        missing = [p for p in HOST_PHASES if p not in d["host"]]
        if missing:
            raise ValueError(f"cost model: host phases {missing} missing")
        host = {p: LinearModel(dict(c)) for p, c in d["host"].items()}
        for p, m in host.items():
            _check_terms(m.coefficients, m.terms(StepFeatures()), f"host {p}")
        return cls(device, host, dict(d.get("meta", {})))


def _check_terms(coefficients: dict, known: dict, what: str) -> None:
    unknown = sorted(set(coefficients) - set(known))
    if unknown:
        raise ValueError(f"cost model: unknown {what} terms {unknown} (known: {sorted(known)})")


def fixed_cost_model(device_base_s: float = 5e-3, per_row_s: float = 2e-5,
                     kv_per_mtoken_s: float = 2e-2, prefill_per_ktoken_s: float = 2e-2,
                     per_compression_s: float = 1e-4, host_per_step_s: float = 5e-4,
                     host_per_row_s: float = 2e-6) -> CostModel:
    """A cost model with stated coefficients, no measurement (tests, examples). The defaults
    are of the order of a Qwen3-8B step on one large GPU; they are not a calibration."""
    knots = (1, 512)
    device = LinearModel({"rows@1": device_base_s, "rows@512": device_base_s + 511 * per_row_s,
                          "kv_read_per_mtoken": kv_per_mtoken_s,
                          "prefill_per_ktoken": prefill_per_ktoken_s,
                          "per_compression": per_compression_s}, knots)
    host = {p: LinearModel({"base": host_per_step_s / 3, "per_row": host_per_row_s / 3})
            for p in HOST_PHASES}
    return CostModel(device, host, {"source": "fixed (not measured)"})
