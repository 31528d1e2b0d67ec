"""A sweep interrupted by Ctrl-C keeps its finished simulations: each goes to a checkpoint as
it finishes, and the rerun simulates only the others (and none whose parameters changed)."""
import pytest

from zipage.sim import paper
from zipage.sim.cost_model import fixed_cost_model


def jobs(n_values, temperature=0.6):
    return [{"label": f"job n={n}", "n": n, "cost": fixed_cost_model(),
             "temperature": temperature} for n in n_values]


def test_an_interrupted_sweep_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    ran, checkpoint = [], str(tmp_path / "sweep.json.partial.jsonl")

    def fake_simulate(n, stop_at=None, **_):
        if n == stop_at:
            raise KeyboardInterrupt  # Ctrl-C during the third simulation
        ran.append(n)
        return {"output_tokens_per_s": float(n), "simulation_cpu_s": 0.0}

    monkeypatch.setattr(paper, "simulate", lambda **kw: fake_simulate(**kw, stop_at=3))
    with pytest.raises(KeyboardInterrupt):
        paper.run_jobs(jobs([1, 2, 3, 4]), checkpoint=checkpoint)
    assert ran == [1, 2]
    with open(checkpoint, "a") as f:
        f.write('{"key": "cut short by the kill')  # a line the interrupt cut short
    monkeypatch.setattr(paper, "simulate", lambda **kw: fake_simulate(**kw))
    lines = []
    results = paper.run_jobs(jobs([1, 2, 3, 4]), checkpoint=checkpoint, log=lines.append)
    assert [r["output_tokens_per_s"] for r in results] == [1.0, 2.0, 3.0, 4.0]
    assert ran == [1, 2, 3, 4]  # 1 and 2 came from the checkpoint
    assert sum(f"from {checkpoint}" in line for line in lines) == 2
    # a job with other parameters is not the checkpoint's, even under the same label
    paper.run_jobs(jobs([1], temperature=1.0), checkpoint=checkpoint)
    assert ran == [1, 2, 3, 4, 1]


def test_parallel_jobs_write_the_checkpoint_too(tmp_path, monkeypatch):
    checkpoint = str(tmp_path / "c.jsonl")
    monkeypatch.setattr(paper, "simulate", lambda n, **_: {"output_tokens_per_s": float(n),
                                                           "simulation_cpu_s": 0.0})
    paper.run_jobs(jobs([5, 6, 7]), processes=2, checkpoint=checkpoint)
    assert len(paper.read_checkpoint(checkpoint)) == 3
