"""The engine: requests, scheduling and KV block bookkeeping, in pure Python (no torch).

llm_engine.py   LLMEngine: add_request / step / abort_all; the runner protocol
messages.py     SchedulerOutput (engine -> runner) and StepResult (runner -> engine)
scheduler.py    continuous batching, chunked prefill, preemption, compression trigger
block_manager.py  free queue, reference counts, prefix caching, compression targets
sequence.py     one sample's token counts, block table and metrics
outputs.py      stop strings, text and metrics of finished samples
progress.py     the progress bar of LLM.generate
"""
