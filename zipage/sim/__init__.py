"""Throughput simulation: the real LLMEngine, Scheduler and BlockManager driven by a runner
that advances a virtual clock by a measured step-cost model (docs/throughput_model.md).

features.py (what a step costs depends on), cost_model.py (the model and its fit),
calibration.py / synthetic.py / calibration_file.py (measuring it), sim_runner.py and
simulate.py (the simulation), lengths.py (output lengths), trace.py (per-step traces of
measured runs), report.py (one report format, measured or simulated), validate.py and
paper.py (prediction of measured runs, the paper workload and the sweep).
"""
