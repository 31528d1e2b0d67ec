"""The model runner: executes SchedulerOutputs on one device (memory plan, batch tensors,
forward, sampling, CUDA graphs, compression calls). It implements the runner protocol of
zipage/engine/llm_engine.py and makes no scheduling decision."""
