"""The cost model: interpolation table, non-negative least squares, fit recovery, JSON round
trip, calibration points on the real runner."""
import numpy as np
import pytest

from zipage.sim.cost_model import CostModel, LinearModel, fit_linear, fixed_cost_model, \
    hat_weights, nnls
from zipage.sim.features import StepFeatures


def test_hat_weights_interpolate_and_extrapolate():
    knots = (1, 8, 32)
    assert hat_weights(8, knots) == [0.0, 1.0, 0.0]
    assert hat_weights(20, knots) == pytest.approx([0.0, 0.5, 0.5])
    assert hat_weights(0, knots) == [1.0, 0.0, 0.0]  # constant below the first knot
    assert hat_weights(56, knots) == pytest.approx([0.0, -1.0, 2.0])  # linear above the last
    assert hat_weights(3, (5,)) == [1.0]


def test_nnls_satisfies_the_optimality_conditions():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m, n = rng.integers(3, 40), rng.integers(1, 10)
        A = rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-4, 4, n)
        b = rng.standard_normal(m)
        x = nnls(A, b)
        grad = A.T @ (b - A @ x)  # KKT: x >= 0, grad <= 0, grad = 0 where x > 0
        scale = np.linalg.norm(A, axis=0) * max(np.linalg.norm(b), 1)
        assert (x >= 0).all()
        assert (grad / scale <= 1e-8).all()
        assert (np.abs(grad[x > 0]) / scale[x > 0] <= 1e-8).all()


def test_nnls_recovers_an_exact_nonnegative_solution():
    rng = np.random.default_rng(1)
    A = rng.random((30, 5))
    truth = np.array([2.0, 0.0, 1e-3, 0.0, 7.0])
    assert nnls(A, A @ truth) == pytest.approx(truth, abs=1e-9)


def synthetic_steps(rng, n=60):
    return [StepFeatures(decode_rows=int(r), kv_read_tokens=int(r * c),
                         prefill_rows=int(p > 0), prefill_tokens=int(p),
                         compressions=int(k), compressed_tokens=int(k * length))
            for r, c, p, k, length in zip(
                rng.choice([1, 8, 32, 128, 256], n), rng.integers(100, 9000, n),
                rng.choice([0, 0, 512, 4096], n), rng.choice([0, 0, 1, 16], n),
                rng.choice([288, 2304, 9216], n))]


def test_fit_recovers_a_known_model():
    truth = LinearModel({"rows@1": 4e-3, "rows@32": 4.5e-3, "rows@256": 9e-3,
                         "kv_read_per_mtoken": 0.034, "prefill_per_ktoken": 0.025,
                         "mixed_step": 2e-3, "compression_step": 5e-4, "per_compression": 1e-4,
                         "compressed_per_mtoken": 0.2}, (1, 32, 256))
    feats = synthetic_steps(np.random.default_rng(2))
    model, err = fit_linear(feats, [truth(f) for f in feats], (1, 32, 256))
    assert err["max_abs_rel_error"] < 1e-9
    for name, value in truth.coefficients.items():
        assert model.coefficients[name] == pytest.approx(value, rel=1e-6)


def test_fit_reports_its_error_on_noisy_times():
    feats = synthetic_steps(np.random.default_rng(3))
    rng = np.random.default_rng(4)
    base = fixed_cost_model().device
    times = [base(f) * (1 + 0.05 * rng.standard_normal()) for f in feats]
    _, err = fit_linear(feats, times, (1, 512))
    assert 0.02 < err["rms_rel_error"] < 0.08 and err["points"] == 60


def test_fit_rejects_bad_input():
    with pytest.raises(ValueError, match="no measured steps"):
        fit_linear([], [])
    with pytest.raises(ValueError, match="positive"):
        fit_linear([StepFeatures(decode_rows=1)], [0.0])


def test_cost_model_round_trips_and_rejects_unknown_terms():
    cost = fixed_cost_model()
    again = CostModel.from_dict(cost.to_dict())
    f = StepFeatures(decode_rows=100, kv_read_tokens=200_000, compressions=3,
                     compressed_tokens=7000)
    assert again.device_s(f) == cost.device_s(f) > 0
    assert again.host_s("post", f) == cost.host_s("post", f) > 0
    d = cost.to_dict()
    d["device"]["kv_bytes_typo"] = 1.0
    with pytest.raises(ValueError, match="unknown device terms.*kv_bytes_typo"):
        CostModel.from_dict(d)
