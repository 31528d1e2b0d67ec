"""The offline entry point: ``LLM(model, **options).generate(prompts, sampling_params)``."""
import time
import warnings
from numbers import Integral

import torch

from zipage.config import EngineConfig
from zipage.engine.llm_engine import InvalidRequest, LLMEngine
from zipage.engine.progress import Progress
from zipage.models.loader import build_model, load_hf_config, load_tokenizer, resolve
from zipage.models.spec import rank_spec, spec_from_hf_config
from zipage.outputs import GenerateStats, RequestOutput
from zipage.sampling_params import SamplingParams
from zipage.worker.model_runner import ModelRunner


def load_engine_tokenizer(model: str, **options):
    """The tokenizer ``LLM(model, **options).tokenizer`` would have, without loading weights."""
    cfg = EngineConfig.from_kwargs(model, **options)
    path, gguf = resolve(cfg.model, cfg.load_format)
    spec = spec_from_hf_config(load_hf_config(path, gguf))
    return load_tokenizer(path, gguf, cfg.tokenizer, spec.vocab_size)


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
        if cfg.tensor_parallel_size > 1:
            runner = self._tp_runner(path, gguf)
        else:
            model_obj = build_model(self.spec, path, gguf, cfg.load_format, self.dtype,
                                    self.device, cfg.seed)
            runner = ModelRunner(cfg, model_obj, self.device, self.dtype, self.max_model_len,
                                 self.eos_token_ids)
        print(runner.plan.describe(cfg.block_size, self.max_model_len, cfg.num_kept_blocks))
        self.engine = LLMEngine(cfg, runner, self.tokenizer, self.eos_token_ids,
                                self.max_model_len, self.spec.vocab_size)
        self.last_stats = GenerateStats()

    def _tp_runner(self, path, gguf):
        """One process per rank (GPU r of the visible ones, or the CPU with gloo)."""
        from zipage.distributed.tp_runner import RankSetup, TPRunner
        n = self.config.tensor_parallel_size
        rank_spec(self.spec, n)  # a shape that does not split fails here, before any process
        if self.device.type == "cuda" and torch.cuda.device_count() < n:
            raise ValueError(f"tensor_parallel_size={n} needs {n} GPUs; "
                             f"{torch.cuda.device_count()} visible")
        setup = RankSetup(self.config, self.spec, path, gguf, self.dtype, self.max_model_len,
                          frozenset(self.eos_token_ids))
        return TPRunner(setup, n, self.device.type)

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

    # Parts of the engine that benchmarks and tests look at.
    runner = property(lambda self: self.engine.runner)
    scheduler = property(lambda self: self.engine.scheduler)
    block_manager = property(lambda self: self.engine.block_manager)
    num_kv_blocks = property(lambda self: self.engine.block_manager.num_blocks)

    @property
    def max_concurrency(self) -> int:
        c = self.config.num_kept_blocks
        if self.config.compression.compress_prompt_only:
            c = None  # SnapKV: requests grow with the output as in Full KV
        per_request = c + 1 if c is not None else -(-self.max_model_len // self.config.block_size)
        return min(self.config.max_num_seqs, self.num_kv_blocks // per_request)

    def shutdown(self) -> None:
        """Release the model, KV cache and CUDA graphs now (before building another engine).
        The LLM cannot generate afterwards; a second call does nothing."""
        import gc
        if self.engine is None:
            return
        close = getattr(getattr(self.engine, "runner", None), "close", None)
        if close is not None:
            close()  # tensor-parallel ranks: stopped and joined
        self.engine = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _encode(self, prompt) -> list[int]:
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("this model has no tokenizer: pass prompts as token-id lists")
            return self.tokenizer(prompt).input_ids
        if not isinstance(prompt, (list, tuple)):
            raise InvalidRequest(f"a prompt is a string or a list of token ids, not "
                                 f"{type(prompt).__name__}")
        return list(prompt)  # the engine checks that these are token ids

    def generate(self, prompts, sampling_params=None, use_tqdm: bool = True, on_sample=None):
        """Run all prompts to completion; see docs/design.md ("Public API").

        If it is interrupted or fails, the engine drops every request (all KV blocks free)
        and stays usable; samples already passed to ``on_sample`` are all that is kept.
        ``last_stats`` then describes the interrupted call (``interrupted=True``; token counts
        include the dropped requests' work).
        """
        if self.engine is None:
            raise RuntimeError("this LLM was shut down (llm.shutdown()); build a new LLM to "
                               "generate again")
        prompts = _prompt_list(prompts)
        params = sampling_params or SamplingParams()
        params = list(params) if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(params) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts but {len(params)} sampling params")
        if not all(isinstance(p, SamplingParams) for p in params):
            raise TypeError("sampling_params must be SamplingParams or a list of them")
        engine, start = self.engine, time.perf_counter()
        engine.reset_stats()
        preemptions0, compressions0 = engine.scheduler.num_preemptions, engine.scheduler.num_compressions
        results, progress = [], None
        try:
            for i, (prompt, p) in enumerate(zip(prompts, params)):
                results.append(RequestOutput(i, prompt if isinstance(prompt, str) else None, [], []))
                try:
                    results[i].prompt_token_ids = self._encode(prompt)
                    engine.add_request(i, results[i].prompt_token_ids, p, arrival_time=start)
                except InvalidRequest as e:
                    results[i].error = str(e)
            failed = [r for r in results if r.error is not None]
            if failed:  # the others run; say so rather than return empty outputs silently
                warnings.warn(f"{len(failed)} of {len(results)} requests cannot run and have "
                              f"no output (RequestOutput.error); request "
                              f"{failed[0].request_id}: {failed[0].error}", stacklevel=2)
            num_samples = sum(p.n for r, p in zip(results, params) if r.error is None)
            progress = Progress(engine, num_samples, start, enabled=use_tqdm)
            while engine.has_unfinished:
                for request_id, completion in engine.step():
                    results[request_id].outputs.append(completion)
                    progress.sample_done(len(completion.token_ids))
                    if on_sample is not None:
                        on_sample(request_id, completion)
                progress.refresh()
        except BaseException:
            # The stats still describe this call, with the dropped requests' work counted
            # (a harness times interrupted calls too); then the engine drops them.
            dropped = list(engine.scheduler.requests.values())
            engine.abort_all()
            self.last_stats = self._stats(start, results, preemptions0, compressions0, dropped)
            raise
        finally:
            if progress is not None:
                progress.close()
        self.last_stats = self._stats(start, results, preemptions0, compressions0)
        for r in results:
            r.outputs.sort(key=lambda c: c.index)
        return results

    def _stats(self, start: float, results, preemptions0: int, compressions0: int,
               dropped=None) -> GenerateStats:
        """This call's stats; `dropped`: the unfinished requests of an interrupted call."""
        e, s = self.engine.stats, self.engine.scheduler
        done = [c for r in results for c in r.outputs]
        interrupted, dropped = dropped is not None, dropped or []
        return GenerateStats(
            wall_time_s=time.perf_counter() - start,
            num_prompt_tokens=sum(len(r.prompt_token_ids) * len(r.outputs) for r in results)
            + sum(seq.num_prompt_tokens for seq in dropped),
            num_output_tokens=sum(len(c.token_ids) for c in done)
            + sum(seq.num_output_tokens for seq in dropped),
            num_steps=e.num_steps, peak_running=e.peak_running,
            mean_running=e.sum_running / max(e.num_steps, 1),
            num_preemptions=s.num_preemptions - preemptions0,
            num_compressions=s.num_compressions - compressions0,
            compression_time_s=e.compression_time_s, num_kv_blocks=self.num_kv_blocks,
            max_concurrency=self.max_concurrency, schedule_time_s=e.schedule_time_s,
            execute_time_s=e.execute_time_s, interrupted=interrupted)


def _prompt_list(prompts) -> list:
    """One prompt (a string or a list of token ids) or a list of prompts -> a list."""
    if isinstance(prompts, str):
        return [prompts]
    if not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts must be a string, a list of token ids, or a list of those; "
                        f"got {type(prompts).__name__}")
    if prompts and isinstance(prompts[0], Integral) and not isinstance(prompts[0], bool):
        return [prompts]
    return list(prompts)
