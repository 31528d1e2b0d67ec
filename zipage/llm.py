"""The offline entry point: ``LLM(model, **options).generate(prompts, sampling_params)``."""
import time

import torch
from tqdm.auto import tqdm

from zipage.config import EngineConfig
from zipage.engine.block_manager import BlockManager
from zipage.engine.scheduler import Scheduler, SchedulerConfig
from zipage.engine.sequence import Sequence
from zipage.models.loader import build_model, load_hf_config, load_tokenizer, resolve
from zipage.models.spec import spec_from_hf_config
from zipage.outputs import CompletionOutput, GenerateStats, RequestOutput
from zipage.worker.model_runner import ModelRunner
from zipage.sampling_params import SamplingParams


class LLM:
    def __init__(self, model: str, **options):
        self.config = cfg = EngineConfig.from_kwargs(model, **options)
        self.device = cfg.torch_device()
        self.dtype = cfg.torch_dtype(self.device)
        path, gguf = resolve(cfg.model, cfg.load_format)
        hf_config = load_hf_config(path, gguf)
        self.spec = spec_from_hf_config(hf_config)
        self.tokenizer = load_tokenizer(path, gguf, cfg.tokenizer, self.spec.vocab_size)
        self.max_model_len = self._max_model_len()
        self.eos_token_ids = self._eos_ids(hf_config)
        model_obj = build_model(self.spec, path, gguf, cfg.load_format, self.dtype, self.device, cfg.seed)
        self.runner = ModelRunner(cfg, model_obj, self.device, self.dtype, self.max_model_len)
        self.runner.eos_token_ids = self.eos_token_ids
        plan = self.runner.plan
        self.num_kv_blocks = plan.num_blocks
        print(plan.describe(cfg.block_size, self.max_model_len, cfg.num_kept_blocks))
        # A compressed request scores with the queries of its own last W tokens: cache hits
        # must leave those to compute (spec §9 forces a miss on the last block for this).
        recompute = cfg.observation_window if cfg.budget is not None else 1
        self.block_manager = BlockManager(plan.num_blocks, cfg.block_size,
                                          cfg.enable_prefix_caching, recompute)
        self.scheduler = Scheduler(SchedulerConfig(
            block_size=cfg.block_size, max_num_seqs=cfg.max_num_seqs,
            max_num_batched_tokens=cfg.max_num_batched_tokens, max_model_len=self.max_model_len,
            num_kept_blocks=cfg.num_kept_blocks, num_query_slots=plan.num_query_slots),
            self.block_manager)
        self.last_stats = GenerateStats()

    def _max_model_len(self) -> int:
        limit = self.spec.max_position_embeddings
        asked = self.config.max_model_len or limit
        if asked > limit:
            raise ValueError(f"max_model_len={asked} exceeds the model's "
                             f"max_position_embeddings={limit}")
        return asked

    def _eos_ids(self, hf_config) -> set[int]:
        ids = getattr(hf_config, "eos_token_id", None)
        ids = set(ids if isinstance(ids, (list, tuple)) else [ids] if ids is not None else [])
        if self.tokenizer is not None and self.tokenizer.eos_token_id is not None:
            ids.add(self.tokenizer.eos_token_id)
        return ids

    def shutdown(self) -> None:
        """Release the model, KV cache and CUDA graphs now (before building another engine)."""
        import gc
        self.runner = None
        self.block_manager = self.scheduler = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    @property
    def max_concurrency(self) -> int:
        c = self.config.num_kept_blocks
        per_request = c + 1 if c is not None else -(-self.max_model_len // self.config.block_size)
        return min(self.config.max_num_seqs, self.num_kv_blocks // per_request)

    # -- requests -----------------------------------------------------------------------------
    def _encode(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer: pass prompts as token-id lists")
            return self.tokenizer(prompt).input_ids
        return [int(t) for t in prompt]

    def _check_prompt(self, ids: list[int]) -> str | None:
        if not ids:
            return "empty prompt"
        if len(ids) >= self.max_model_len:
            return (f"prompt has {len(ids)} tokens but max_model_len is {self.max_model_len} "
                    f"(no room to generate)")
        need = -(-(len(ids) + 1) // self.config.block_size)
        if need > self.num_kv_blocks:
            return f"prompt needs {need} KV blocks but the pool has {self.num_kv_blocks}"
        return None

    def _seed(self, params: SamplingParams, prompt_index: int, sample_index: int) -> int:
        if params.seed is not None:
            return params.seed + sample_index
        return (self.config.seed * 1_000_003 + prompt_index * 7919 + sample_index) & 0x7FFFFFFF

    def generate(self, prompts, sampling_params=None, use_tqdm: bool = True, on_sample=None):
        """Run all prompts to completion; see docs/design.md ("Public API")."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = sampling_params or SamplingParams()
        params = list(params) if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params")
        from zipage.engine.loop import run_requests
        return run_requests(self, prompts, params, use_tqdm, on_sample)
