"""Finished cells survive a restart and are never mixed with other settings; the methods the
benchmarks call "default" and "paper" are what the engine configs ship."""
from pathlib import Path

import pytest
import yaml

from scripts.fidelity import methods as fm
from scripts.fidelity.cells import CellMismatch, CellStore
from zipage.compression.config import CompressionConfig

ROOT = Path(__file__).resolve().parents[1]


def test_a_finished_cell_is_reused_not_rerun(tmp_path):
    store, calls = CellStore(str(tmp_path / "cells")), []

    def run():
        calls.append(1)
        return dict(records=[1, 2, 3])

    first, new = store.get_or_run("default@1024", {"budget": 1024}, run)
    again, new2 = CellStore(str(tmp_path / "cells")).get_or_run("default@1024", {"budget": 1024}, run)
    assert (new, new2, len(calls)) == (True, False, 1)
    assert again["records"] == [1, 2, 3] == first["records"]
    assert not list((tmp_path / "cells").glob("*.tmp"))


def test_a_cell_made_with_other_settings_is_an_error(tmp_path):
    store = CellStore(str(tmp_path))
    store.save("default@1024", {"budget": 1024, "options": {"redundancy_weight": 0.2}})
    with pytest.raises(CellMismatch, match="other settings"):
        store.get_or_run("default@1024", {"budget": 1024, "options": {"redundancy_weight": 0.8}},
                         lambda: pytest.fail("must not run"))


def test_a_failed_run_leaves_no_cell(tmp_path):
    store = CellStore(str(tmp_path))

    def boom():
        raise RuntimeError("engine died")

    with pytest.raises(RuntimeError):
        store.get_or_run("recent@512", {"budget": 512}, boom)
    assert store.load("recent@512", {"budget": 512}) is None


def _engine_config(name):
    """The CompressionConfig that `engine=<name>` passes to the engine (its YAML's window too)."""
    with open(ROOT / "configs/engine" / f"{name}.yaml") as f:
        y = yaml.safe_load(f)
    options = dict(y.get("compression") or {})
    if y.get("observation_window") is not None:
        options["observation_window"] = y["observation_window"]
    return CompressionConfig(**options)


def test_default_method_is_the_engine_default_everywhere():
    from zipage.compression.presets import preset
    for method, engine in ((fm.DEFAULT, "zipage"), ("paper", "zipage_paper"),
                           ("full", "zipage_full"), ("attn_recent", "zipage_attn_recent")):
        assert CompressionConfig(**fm.options(method)) == _engine_config(engine) == preset(engine)
    # engine=zipage is the published score (issue 31)
    assert _engine_config("zipage") == CompressionConfig.paper() == CompressionConfig()
    assert CompressionConfig(**fm.options("attn_recent")) == CompressionConfig(
        **fm.options("attn_recent=0.25", sinks=4))
    assert CompressionConfig(**fm.options("attn")) == CompressionConfig.attention_only()


def test_method_names():
    assert fm.canonical("zipage") == "default" and fm.canonical("zipage_paper") == "paper"
    assert fm.canonical("zipage_rw=0.50") == fm.canonical("rw=0.5") == "rw=0.5"
    assert fm.options("rw=0.35")["redundancy_weight"] == 0.35
    assert CompressionConfig(**fm.options("recent", sinks=8)) == \
        CompressionConfig.attention_only(score="recent", num_sink_tokens=8)
    with pytest.raises(ValueError, match="unknown method"):
        fm.canonical("zipagee")
    with pytest.raises(ValueError):
        fm.canonical("rw=1.5")
    assert fm.canonical("attn_recent=0.250") == "attn_recent=0.25"
    assert CompressionConfig(**fm.options("attn_recent=0.25", sinks=4)) == \
        CompressionConfig.attn_recent()
    assert CompressionConfig(**fm.options("attn_sinks", sinks=4)) == \
        CompressionConfig.attention_only(num_sink_tokens=4)
    with pytest.raises(ValueError, match="recent ratio"):
        fm.canonical("attn_recent=1")
    with pytest.raises(ValueError, match="expected attn_recent=<number>"):
        fm.canonical("attn_recent=abc")


def test_cli_contract_and_bad_method_is_a_clear_error(capsys):
    import argparse

    from scripts.fidelity import agreement, nll as fidelity
    for module in (fidelity, agreement):
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        args = parser.parse_args(["--methods", "default", "zipage_rw=0.35"])
        assert args.methods == ["default", "rw=0.35"]
        with pytest.raises(SystemExit):
            parser.parse_args(["--methods", "nope"])
        assert "unknown method 'nope'" in capsys.readouterr().err


def test_comparison_presets_are_methods_with_their_own_window():
    from zipage.compression.presets import COMPARISON, preset
    from zipage.config import EngineConfig
    assert fm.expand(["presets", "default"]) == ["default", "attn_recent", *COMPARISON]
    for name in COMPARISON:
        opts = fm.engine_options(name, window=16)
        engine = EngineConfig.from_kwargs("m", budget=256, block_size=16, **opts)
        assert engine.compression == preset(name), name  # the preset's own W (R-KV: 8)
        assert name in fm.label(name)
    assert fm.engine_options("default", window=24)["observation_window"] == 24
