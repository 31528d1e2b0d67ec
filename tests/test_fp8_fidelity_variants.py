"""`bench fp8-fidelity`'s storage variants: the bf16 variant rounds what the engine writes,
and budget cells refuse variant lists the report cannot pair (no model needed)."""
import pytest
import torch

import zipage.layers.attention as attention_mod
from scripts import bench
from scripts.fidelity import fp8_stores


def test_bf16_variant_writes_bf16_rounded_kv_into_the_fp32_cache(monkeypatch):
    written = {}
    monkeypatch.setattr(attention_mod, "store_kv",
                        lambda key, value, *a, **kw: written.update(key=key, value=value))
    store = fp8_stores.RoundedStore(*fp8_stores.ROUNDED["bf16"])
    key, value = torch.randn(5, 2, 8), torch.randn(5, 2, 8)
    store(key, value, None, None, None)
    for name, x in (("key", key), ("value", value)):
        assert written[name].dtype == torch.float32
        assert torch.equal(written[name], x.to(torch.bfloat16).float())
        assert not torch.equal(written[name], x)  # random fp32 values are not bf16 values


@pytest.mark.parametrize("variants,message", [
    (["fp8"], "auto \\(the reference of every budget cell\\) first"),
    (["auto", "layer_calib"], "calibrated variants are Full KV only"),
])
def test_budget_variants_need_auto_first_and_no_calibration(variants, message):
    with pytest.raises(SystemExit, match=message):
        bench.main(["fp8-fidelity", "--budgets", "256", "--budget-variants", *variants])


@pytest.mark.parametrize("variant,rounded", [("fp8_k", "key"), ("fp8_v", "value")])
def test_fp8_k_and_fp8_v_round_one_of_k_and_v_as_the_engine_does(monkeypatch, variant, rounded):
    from zipage.kernels.fp8 import dequantize_reference, quantize_reference
    written = {}
    monkeypatch.setattr(attention_mod, "store_kv",
                        lambda key, value, *a, **kw: written.update(key=key, value=value))
    store = fp8_stores.RoundedStore(*fp8_stores.ROUNDED[variant])
    x = {"key": torch.randn(5, 2, 8), "value": torch.randn(5, 2, 8)}
    store(x["key"], x["value"], None, None, None)
    for name in ("key", "value"):
        expected = dequantize_reference(*quantize_reference(x[name])) if name == rounded \
            else x[name]
        assert torch.equal(written[name], expected)
