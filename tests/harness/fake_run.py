"""run.py with the fake engine (fake_engine.py), for tests that launch the app as users do:

    python tests/harness/fake_run.py -m hydra/launcher=submitit_local task=amc23,gsm8k ...

The engine is swapped inside the job function, so it also holds in the processes a launcher
starts (submitit pickles the job function and runs it elsewhere). Needs the repo root and
tests/harness on PYTHONPATH. FAKE_GENERATE_S=<s> makes every generate() call take that long
in real time, so parallel jobs overlap; FAKE_STEP_S=<s> makes every engine step take that
long (samples finish over time: a test can kill the process mid-generation); timings use
the fake engine's clock, as in-process.
"""
import os
import time

import hydra

import run  # noqa: F401 (registers the config schemas, as `python run.py` does)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_fake_engine(model_id, kwargs):
    import fake_engine
    from tasks import generate as timing

    step_s = float(os.environ.get("FAKE_STEP_S", "0"))
    llm = fake_engine.FakeLLM(model_id, on_step=(lambda step: time.sleep(step_s)) if step_s
                              else None, **kwargs)
    timing.clock = llm.clock  # segments timed on the engine's clock: exact, as in-process
    generate, delay = llm.generate, float(os.environ.get("FAKE_GENERATE_S", "0"))

    def slow_generate(*args, **kw):
        time.sleep(delay)
        return generate(*args, **kw)
    llm.generate = slow_generate
    return llm, fake_engine.FakeSamplingParams


@hydra.main(version_base=None, config_path=os.path.join(ROOT, "configs"), config_name="config")
def main(cfg) -> None:
    from tasks import evaluate
    evaluate.make_engine = make_fake_engine
    run.main.__wrapped__(cfg)  # run.py's job, undecorated


if __name__ == "__main__":
    main()
