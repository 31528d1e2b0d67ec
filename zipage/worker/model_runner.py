"""Executes scheduler decisions on one device: compress, forward, sample. No policy here."""
import time
from dataclasses import dataclass

import numpy as np
import torch

from zipage.config import EngineConfig
from zipage.engine.scheduler import SchedulerOutput
from zipage.layers.attention import AttentionMetadata
from zipage.layers.sampler import sample
from zipage.models.decoder import CausalLM
from zipage.worker.batch import Batch, attention_metadata, build_batch, to_device
from zipage.worker.cuda_graph import DecodeGraphs
from zipage.worker.memory import MemoryPlan, plan_memory


class ModelRunner:
    def __init__(self, cfg: EngineConfig, model: CausalLM, device: torch.device,
                 dtype: torch.dtype, max_model_len: int):
        self.cfg, self.model, self.device, self.dtype = cfg, model, device, dtype
        self.spec = model.spec
        self.block_size = cfg.block_size
        self.window = cfg.observation_window
        self.max_model_len = max_model_len
        self.compression_time_s = 0.0
        self.teacher_records: dict[int, list[tuple[float, int, bool]]] = {}
        self.eos_token_ids: set[int] = set()  # set by LLM; masked while min_tokens is unmet
        peak = self._profile_peak_memory() if device.type == "cuda" else 0
        self.plan: MemoryPlan = plan_memory(self.spec, cfg, dtype, device, peak,
                                              max_model_len=max_model_len)
        self._allocate_caches()
        self.compressor = None
        if cfg.budget is not None:
            from zipage.worker.compressor import Compressor
            self.compressor = Compressor(cfg, self)
        self.graphs = None
        if device.type == "cuda" and not cfg.enforce_eager:
            width = (cfg.num_kept_blocks + 1 if cfg.budget is not None
                     else -(-max_model_len // self.block_size))
            self.graphs = DecodeGraphs(self, max_batch=cfg.max_num_seqs, table_width=width)

    # -- setup ------------------------------------------------------------------------------
    def _allocate_caches(self):
        s, p, b = self.spec, self.plan, self.block_size
        shape = (2, s.num_layers, p.num_blocks, b, s.num_kv_heads, s.head_dim)
        self.kv_cache = torch.zeros(shape, dtype=self.dtype, device=self.device)
        self.query_cache = None
        if p.num_query_slots:
            self.query_cache = torch.zeros(s.num_layers, p.num_query_slots, self.window,
                                           s.num_heads, s.head_dim, dtype=self.dtype, device=self.device)
        self.score_cache = None
        if self.cfg.budget is not None and self.cfg.compression.use_global_score:
            self.score_cache = torch.zeros(s.num_layers, p.num_blocks, b, s.num_kv_heads,
                                           dtype=self.dtype, device=self.device)
        for i, layer in enumerate(self.model.model.layers):
            attn = layer.self_attn
            attn.k_cache, attn.v_cache = self.kv_cache[0, i], self.kv_cache[1, i]
            attn.q_cache = None if self.query_cache is None else self.query_cache[i]

    @torch.inference_mode()
    def _profile_peak_memory(self) -> int:
        """Peak bytes of weights plus the largest prefill step, measured on a scratch cache."""
        s, b = self.spec, self.block_size
        tokens = min(self.cfg.max_num_batched_tokens, self.max_model_len)
        blocks = -(-tokens // b)
        scratch = torch.zeros(2, blocks, b, s.num_kv_heads, s.head_dim, dtype=self.dtype, device=self.device)
        for layer in self.model.model.layers:
            layer.self_attn.k_cache, layer.self_attn.v_cache = scratch[0], scratch[1]
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
        del scratch, hidden
        torch.cuda.empty_cache()
        return peak

    # -- one step ---------------------------------------------------------------------------
    @torch.inference_mode()
    def execute(self, out: SchedulerOutput) -> dict[int, int]:
        """Run a step and wait for its tokens: {seq_id: token}."""
        return self.collect(self.launch(out))

    @torch.inference_mode()
    def launch(self, out: SchedulerOutput, previous: "StepHandle | None" = None) -> "StepHandle":
        """Queue a step on the device without waiting for its tokens. Input tokens still being
        sampled by `previous` (PENDING on the host) are taken from its device tensor."""
        if out.compressions:
            t0 = time.perf_counter()
            self.compressor.run(out.compressions)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.compression_time_s += time.perf_counter() - t0
        if not out.seqs:
            return StepHandle([], None)
        batch = build_batch(out, self.block_size, self.window)
        hidden = self._forward(batch, self._pending_inputs(batch, previous))
        return self._sample(batch, hidden)

    def collect(self, handle: "StepHandle") -> dict[int, int]:
        """Wait for a launched step: {seq_id: token}; teacher-forcing records are kept."""
        if handle.tokens is None:
            return {}
        if handle.ready is not None:
            handle.ready.synchronize()  # this step only, not the ones queued after it
        if handle.teacher is not None:
            use, logprob, argmax, forced = (x.tolist() for x in handle.teacher)
            for sid, u, lp, top, f in zip(handle.seq_ids, use, logprob, argmax, forced):
                if u:
                    self.teacher_records.setdefault(sid, []).append((lp, top, top == f))
        return dict(zip(handle.seq_ids, handle.host_tokens.tolist()))

    def _pending_inputs(self, batch: Batch, previous):
        """(rows, tokens) device tensors patching PENDING input ids, or None."""
        if not batch.pending_inputs:
            return None
        if previous is None or previous.tokens is None:
            raise RuntimeError("a step has pending input tokens but no previous step")
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

    def _sample(self, batch: Batch, hidden: torch.Tensor) -> "StepHandle":
        s = batch.sample
        if not s.rows:
            return StepHandle([], None)
        dev = self.device
        n = len(s.rows)
        if s.rows[-1] == n - 1:  # rows are increasing: the first n rows, no gather needed
            logits = self.model.logits(hidden[:n])
        else:
            logits = self.model.logits(hidden[to_device(s.rows, np.int64, dev)])
        for row, extra in s.suppress:  # min_tokens: end-of-sequence tokens are not allowed yet
            logits[row, list(self.eos_token_ids | set(extra))] = float("-inf")
        if all(t == 0 for t in s.temperature) and all(f < 0 for f in s.forced):
            return StepHandle(s.seq_ids, logits.argmax(dim=-1))
        f32 = lambda x: to_device(x, np.float32, dev)  # noqa: E731
        i64 = lambda x: to_device(x, np.int64, dev)  # noqa: E731
        tokens = sample(logits, f32(s.temperature), i64(s.top_k), f32(s.top_p), f32(s.min_p),
                        i64(s.seeds), i64(s.positions),
                        all_greedy=all(t == 0 for t in s.temperature),
                        use_min_p=any(m > 0 for m in s.min_p),
                        use_top_k_p=any(k > 0 for k in s.top_k) or any(p < 1 for p in s.top_p))
        if not any(f >= 0 for f in s.forced):
            return StepHandle(s.seq_ids, tokens)
        forced = torch.tensor(s.forced, dtype=torch.int64, device=dev)
        use = forced >= 0
        logprob = torch.log_softmax(logits, dim=-1).gather(1, forced.clamp(min=0)[:, None])[:, 0]
        teacher = (use, logprob, logits.argmax(dim=-1), forced)
        return StepHandle(s.seq_ids, torch.where(use, forced, tokens), teacher)


@dataclass
class StepHandle:
    """A launched step: its sampling rows and their tokens (on the device: the next step's
    inputs), with copies to the host queued right behind the step and an event marking them."""
    seq_ids: list[int]
    tokens: torch.Tensor | None  # (len(seq_ids),) int64
    teacher: tuple | None = None  # (use, logprob, argmax, forced) when teacher forcing
    host_tokens: torch.Tensor | None = None
    ready: "torch.cuda.Event | None" = None

    def __post_init__(self):
        if self.tokens is None:
            return
        if not self.tokens.is_cuda:
            self.host_tokens = self.tokens
            return
        # Queued now, so reading them later waits for this step, not for steps launched since.
        def host(x):
            return torch.empty(x.shape, dtype=x.dtype, pin_memory=True).copy_(x, non_blocking=True)
        self.host_tokens = host(self.tokens)
        if self.teacher is not None:
            self.teacher = tuple(host(x) for x in self.teacher)
        self.ready = torch.cuda.Event()
        self.ready.record()
