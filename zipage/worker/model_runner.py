"""Executes scheduler decisions on one device: compress, forward, sample. No policy here."""
from dataclasses import replace

import numpy as np
import torch

from zipage.config import EngineConfig
from zipage.engine.messages import SchedulerOutput, StepResult
from zipage.kernels.fp8 import FP8_DTYPE, kv_views
from zipage.layers.attention import AttentionMetadata
from zipage.layers.key_rotation import rotates_keys
from zipage.layers.sampler import sample
from zipage.models.decoder import CausalLM
from zipage.worker.batch import Batch, attention_metadata, build_batch, to_device
from zipage.worker.cuda_graph import DecodeGraphs
from zipage.worker.memory import MemoryPlan, plan_memory
from zipage.worker.step_handle import DeviceTimer, StepHandle


class ModelRunner:
    def __init__(self, cfg: EngineConfig, model: CausalLM, device: torch.device,
                 dtype: torch.dtype, max_model_len: int, eos_token_ids: set[int] = frozenset()):
        self.cfg, self.model, self.device, self.dtype = cfg, model, device, dtype
        self.spec = model.rank_spec  # this rank's heads (the whole model at TP=1)
        self.tp = model.tp
        self.block_size = cfg.block_size
        self.window = cfg.observation_window
        self.max_model_len = max_model_len
        self.eos_token_ids = set(eos_token_ids)  # masked while min_tokens is unmet
        peak = self._profile_peak_memory() if device.type == "cuda" else 0
        self.plan: MemoryPlan = plan_memory(self.spec, cfg, dtype, device, peak,
                                              max_model_len=max_model_len)
        if self.tp.size > 1:  # every rank holds the same block ids: the smallest pool wins
            self.plan = replace(self.plan, num_blocks=self.tp.min(self.plan.num_blocks))
        self._allocate_caches()
        self.compressor = None
        if cfg.budget is not None:
            from zipage.worker.compressor import Compressor
            self.compressor = Compressor(cfg, self)
        self.time_steps = False  # StepResult.device_time_s of every step (traces, calibration)
        self.graphs = None
        if device.type == "cuda" and not cfg.enforce_eager:
            capped = cfg.budget is not None and not cfg.compression.compress_prompt_only
            width = (cfg.num_kept_blocks + 1 if capped
                     else -(-max_model_len // self.block_size))
            self.graphs = DecodeGraphs(self, max_batch=cfg.max_num_seqs, table_width=width)

    # -- setup ------------------------------------------------------------------------------
    def _allocate_caches(self):
        s, p, b = self.spec, self.plan, self.block_size
        shape = (2, s.num_layers, p.num_blocks, b, s.num_kv_heads, s.head_dim)
        self.kv_cache = torch.zeros(shape, dtype=self.cfg.kv_dtype(self.dtype), device=self.device)
        self.k_cache, self.v_cache = kv_views(self.kv_cache)
        # fp8: a float32 scale per (token, KV head), laid out like K (kernels/fp8.py)
        self.kv_scale = None
        if self.cfg.kv_cache_dtype == "fp8":
            self.kv_scale = torch.zeros(shape[:-1], dtype=torch.float32, device=self.device)
        self.query_cache = None
        if p.num_query_slots:
            self.query_cache = torch.zeros(s.num_layers, p.num_query_slots, self.window,
                                           s.num_heads, s.head_dim, dtype=self.dtype, device=self.device)
        self.score_cache = None
        if self.cfg.budget is not None and self.cfg.compression.use_global_score:
            self.score_cache = torch.zeros(s.num_layers, p.num_blocks, b, s.num_kv_heads,
                                           dtype=self.dtype, device=self.device)
        rotate_keys = rotates_keys(self.cfg, s.head_dim)
        for i, layer in enumerate(self.model.model.layers):
            attn = layer.self_attn
            attn.k_cache, attn.v_cache = self.k_cache[i], self.v_cache[i]
            attn.rotate_keys = rotate_keys
            attn.fp8_decode_operand = FP8_DTYPE if self.cfg.fp8_decode == "e4m3" else None
            if self.kv_scale is not None:
                attn.k_scale, attn.v_scale = self.kv_scale[0, i], self.kv_scale[1, i]
            attn.q_cache = None if self.query_cache is None else self.query_cache[i]

    @torch.inference_mode()
    def _profile_peak_memory(self) -> int:
        """Peak bytes of weights plus the largest prefill step, measured on a scratch cache."""
        s, b = self.spec, self.block_size
        tokens = min(self.cfg.max_num_batched_tokens, self.max_model_len)
        blocks = -(-tokens // b)
        shape = (2, blocks, b, s.num_kv_heads, s.head_dim)
        scratch = torch.zeros(shape, dtype=self.cfg.kv_dtype(self.dtype), device=self.device)
        scales = torch.zeros(shape[:-1], dtype=torch.float32, device=self.device)
        scratch_k, scratch_v = kv_views(scratch)
        for layer in self.model.model.layers:
            layer.self_attn.k_cache, layer.self_attn.v_cache = scratch_k, scratch_v
            if self.cfg.kv_cache_dtype == "fp8":
                layer.self_attn.k_scale, layer.self_attn.v_scale = scales[0], scales[1]
            layer.self_attn.q_cache = None
        torch.cuda.reset_peak_memory_stats(self.device)
        meta = AttentionMetadata(
            slot_mapping=torch.arange(tokens, device=self.device), num_decode=0,
            prefill_block_tables=torch.arange(blocks, dtype=torch.int32, device=self.device)[None],
            prefill_cu_seqlens_q=torch.tensor([0, tokens], dtype=torch.int32, device=self.device),
            prefill_context_lens=torch.tensor([tokens], dtype=torch.int32, device=self.device),
            prefill_max_q_len=tokens)
        ids = torch.zeros(tokens, dtype=torch.int64, device=self.device)
        hidden = self.model(ids, torch.arange(tokens, device=self.device), meta)
        rows = min(self.cfg.max_num_seqs, tokens)
        self.model.logits(hidden[:rows]).softmax(-1)
        torch.cuda.synchronize(self.device)
        peak = torch.cuda.max_memory_allocated(self.device)
        del scratch, scratch_k, scratch_v, scales, hidden
        torch.cuda.empty_cache()
        return peak

    # -- the runner protocol (zipage/engine/llm_engine.py) -----------------------------------
    @property
    def num_kv_blocks(self) -> int:
        return self.plan.num_blocks

    @property
    def num_query_slots(self) -> int:
        return self.plan.num_query_slots

    @torch.inference_mode()
    def launch(self, step: SchedulerOutput, previous: StepHandle | None = None) -> StepHandle:
        """Queue a step on the device without waiting for it: compressions, forward, sampling.
        Input tokens still being sampled by ``previous`` are taken from its device tensor."""
        if not self.time_steps:
            return self._launch(step, previous)
        timer = DeviceTimer(self.device)
        handle = self._launch(step, previous)
        handle.step_timer = timer.stop()
        return handle

    def _launch(self, step: SchedulerOutput, previous: StepHandle | None) -> StepHandle:
        timer = None
        if step.compressions:
            timer = DeviceTimer(self.device)
            self.compressor.run(list(step.compressions.values()))
            timer.stop()
        if not step.requests:
            return StepHandle([], None, compression=timer)
        batch = build_batch(step, self.block_size, self.window)
        hidden = self._forward(batch, self._pending_inputs(batch, previous))
        return self._sample(batch, hidden, timer)

    def collect(self, handle: StepHandle) -> StepResult:
        """Wait for a launched step: its sampled tokens and teacher-forcing records."""
        return handle.result()

    @torch.inference_mode()
    def execute(self, step: SchedulerOutput) -> StepResult:
        """Run a step and wait for it."""
        return self.collect(self.launch(step))

    def _pending_inputs(self, batch: Batch, previous: StepHandle | None):
        """(rows, tokens) device tensors for input ids the previous step is sampling, or None."""
        if not batch.pending_inputs:
            return None
        if previous is None or previous.tokens is None:
            raise RuntimeError("a step takes input tokens from a previous step that sampled none")
        where = {sid: i for i, sid in enumerate(previous.seq_ids)}
        rows = to_device([r for r, _ in batch.pending_inputs], np.int64, self.device)
        src = to_device([where[sid] for _, sid in batch.pending_inputs], np.int64, self.device)
        return rows, previous.tokens[src]

    def _forward(self, batch: Batch, pending=None) -> torch.Tensor:
        n = len(batch.input_ids)
        if self.graphs is not None and batch.num_decode == n and self.graphs.fits(n):
            return self.graphs.run(batch, pending)
        meta = attention_metadata(batch, self.device, self.query_cache is not None)
        ids = to_device(batch.input_ids, np.int64, self.device)
        if pending is not None:
            ids[pending[0]] = pending[1]
        pos = to_device(batch.positions, np.int64, self.device)
        return self.model(ids, pos, meta)

    def _sample(self, batch: Batch, hidden: torch.Tensor, timer: DeviceTimer | None) -> StepHandle:
        s = batch.sample
        if not s.rows:
            return StepHandle([], None, compression=timer)
        dev = self.device
        n = len(s.rows)
        if s.rows[-1] == n - 1:  # rows are increasing: the first n rows, no gather needed
            logits = self.model.logits(hidden[:n])
        else:
            logits = self.model.logits(hidden[to_device(s.rows, np.int64, dev)])
        for row, extra in s.suppress:  # min_tokens: end-of-sequence tokens are not allowed yet
            logits[row, list(self.eos_token_ids | set(extra))] = float("-inf")
        if all(t == 0 for t in s.temperature) and all(f < 0 for f in s.forced):
            return StepHandle(s.seq_ids, logits.argmax(dim=-1), compression=timer)
        f32 = lambda x: to_device(x, np.float32, dev)  # noqa: E731
        i64 = lambda x: to_device(x, np.int64, dev)  # noqa: E731
        tokens = sample(logits, f32(s.temperature), i64(s.top_k), f32(s.top_p), f32(s.min_p),
                        i64(s.seeds), i64(s.positions),
                        all_greedy=all(t == 0 for t in s.temperature),
                        use_min_p=any(m > 0 for m in s.min_p),
                        use_top_k_p=any(k > 0 for k in s.top_k) or any(p < 1 for p in s.top_p))
        if not any(f >= 0 for f in s.forced):
            return StepHandle(s.seq_ids, tokens, compression=timer)
        forced = torch.tensor(s.forced, dtype=torch.int64, device=dev)
        use = forced >= 0
        logprob = torch.log_softmax(logits, dim=-1).gather(1, forced.clamp(min=0)[:, None])[:, 0]
        teacher = (use, logprob, logits.argmax(dim=-1), forced)
        return StepHandle(s.seq_ids, torch.where(use, forced, tokens), teacher, timer)
