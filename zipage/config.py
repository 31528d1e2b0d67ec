"""Engine options. Unknown options are an error that lists the valid ones."""
from dataclasses import dataclass, field, fields, replace

import torch

from zipage.compression.config import CompressionConfig

COMPRESSION_OPTIONS = {f.name for f in fields(CompressionConfig)} - {"observation_window"}
COMPRESSION_KEYS = COMPRESSION_OPTIONS | {"observation_window"}  # what compression={...} takes
_DEFAULT_W = CompressionConfig().observation_window


@dataclass
class EngineConfig:
    model: str
    tokenizer: str | None = None
    load_format: str = "auto"  # "auto" | "dummy" (random weights with the model's shapes)
    dtype: str = "auto"  # "auto" (bf16 on GPU, fp32 on CPU) | "bfloat16" | "float16" | "float32"
    device: str = "auto"  # "auto" | "cuda" | "cpu"
    seed: int = 0
    # Compressed PagedAttention: KV budget in tokens per request; None = Full KV.
    budget: int | None = None
    block_size: int = 256
    observation_window: int | None = None  # None: the compression config's (default 16)
    # Scoring switches (zipage.compression.CompressionConfig); also accepted as flat options.
    compression: CompressionConfig | dict = field(default_factory=CompressionConfig)
    compress_layer_chunk: int = 8  # layers scored together (bounds transient memory)
    profile_compression: bool = False  # per-stage compression times (one sync per step)
    # Scheduling and memory.
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    kv_cache_tokens: int | None = None  # explicit KV pool size (tokens); default on CPU
    # "auto": K/V in the model dtype; "fp8": e4m3 with a float32 scale per (token, KV head)
    # (docs/fp8.md): about half the bytes per token, so about twice the tokens per pool.
    kv_cache_dtype: str = "auto"
    # fp8 only: q and k rotated by an orthonormal Hadamard matrix before K is rounded to
    # e4m3 (q.k unchanged, rounding error spread over all channels; docs/fp8.md).
    # None: on with kv_cache_dtype="fp8".
    fp8_key_rotation: bool | None = None
    # fp8 only: how decode attention multiplies the e4m3 cache. "f16": tiles converted to
    # f16 in registers (the default, measured); "e4m3": e4m3 tensor-core MMAs on the cache
    # bytes, q and P as two e4m3 terms (zipage/kernels/fp8_decode_mma.py; opt-in: 0.99x /
    # 1.02x the default on the H200, docs/fp8.md). On the CPU both take the PyTorch reference.
    fp8_decode: str = "f16"
    enable_prefix_caching: bool = True
    enforce_eager: bool = False  # True disables CUDA graphs for decode
    # Schedule step N+1 while step N runs on the device (its sampled tokens stay on the
    # device as the next inputs); outputs are identical to synchronous scheduling. On by
    # default: faster on the H200 for both engines (docs/measurements.md, "async default").
    async_scheduling: bool = True
    tensor_parallel_size: int = 1  # ranks, one process (and GPU) each; docs/design.md

    @classmethod
    def options(cls) -> set[str]:
        """The keyword options LLM(model, ...) takes: every field but the model, and the
        compression switches given flat."""
        return {f.name for f in fields(cls)} - {"model"} | COMPRESSION_OPTIONS

    @classmethod
    def from_kwargs(cls, model: str, **kwargs) -> "EngineConfig":
        unknown = sorted(set(kwargs) - cls.options())
        if unknown:
            raise TypeError(f"unknown engine option(s) {', '.join(unknown)}; valid options: "
                            f"{', '.join(sorted(cls.options()))}")
        flat = {k: kwargs.pop(k) for k in list(kwargs) if k in COMPRESSION_OPTIONS}
        base = kwargs.get("compression", {})
        base = base if isinstance(base, dict) else {
            f.name: getattr(base, f.name) for f in fields(CompressionConfig)}
        kwargs["compression"] = {**base, **flat}
        return cls(model=model, **kwargs)

    def __post_init__(self):
        if isinstance(self.compression, dict):
            unknown = sorted(set(self.compression) - COMPRESSION_KEYS)
            if unknown:
                raise TypeError(f"unknown compression option(s) {', '.join(unknown)}; valid: "
                                f"{', '.join(sorted(COMPRESSION_OPTIONS))}")
            self.compression = CompressionConfig(**self.compression)
        # One window: set here or in the compression config (a preset's), not two different.
        if self.observation_window is None:
            self.observation_window = self.compression.observation_window
        elif self.compression.observation_window not in (self.observation_window, _DEFAULT_W):
            raise ValueError(f"observation_window {self.observation_window} differs from the "
                             f"compression config's {self.compression.observation_window}")
        self.compression = replace(self.compression, observation_window=self.observation_window)
        b = self.block_size
        if b < 16 or b & (b - 1):
            raise ValueError(f"block_size must be a power of two >= 16, got {b}")
        if self.budget is not None:
            if self.budget <= 0 or self.budget % b:
                raise ValueError(f"budget must be a positive multiple of block_size ({b}), "
                                 f"got {self.budget}")
            sinks = self.compression.num_sink_tokens
            if self.observation_window + sinks > self.budget:
                raise ValueError(f"observation_window {self.observation_window} + num_sink_tokens "
                                 f"{sinks} exceed the budget {self.budget}: raise the budget"
                                 + (" or pass num_sink_tokens=0" if sinks else ""))
            recent = self.compression.forced_recent(self.budget)
            if recent + sinks > self.budget:
                raise ValueError(f"the {recent} recent tokens (recent_ratio "
                                 f"{self.compression.recent_ratio}) + num_sink_tokens {sinks} "
                                 f"exceed the budget {self.budget}")
        if self.load_format not in ("auto", "dummy"):
            raise ValueError(f"load_format must be 'auto' or 'dummy', got {self.load_format!r}")
        if self.kv_cache_dtype not in ("auto", "fp8"):
            raise ValueError(f"kv_cache_dtype must be 'auto' or 'fp8', got {self.kv_cache_dtype!r}")
        if self.fp8_key_rotation not in (None, True, False):
            raise ValueError(f"fp8_key_rotation must be true, false or null, got "
                             f"{self.fp8_key_rotation!r}")
        if self.fp8_key_rotation and self.kv_cache_dtype != "fp8":
            raise ValueError("fp8_key_rotation applies to kv_cache_dtype='fp8' only")
        if self.fp8_decode not in ("f16", "e4m3"):
            raise ValueError(f"fp8_decode must be 'f16' or 'e4m3', got {self.fp8_decode!r}")
        if self.fp8_decode != "f16" and self.kv_cache_dtype != "fp8":
            raise ValueError("fp8_decode applies to kv_cache_dtype='fp8' only")
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', got {self.device!r}")
        tp = self.tensor_parallel_size
        if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
            raise ValueError(f"tensor_parallel_size must be a positive integer, got {tp!r}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.max_num_seqs < 1:  # else the scheduler stalls with every request waiting
            raise ValueError(f"max_num_seqs must be at least 1, got {self.max_num_seqs}")
        # 0 used to fall through to the default (a 16k-token pool even on a GPU): refused instead
        for name in ("kv_cache_tokens", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1 (leave it unset for the default), "
                                 f"got {value}")
        if self.max_num_batched_tokens < b:
            raise ValueError("max_num_batched_tokens must be at least one block")

    @property
    def num_kept_blocks(self) -> int | None:
        return None if self.budget is None else self.budget // self.block_size

    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("device='cuda' but no CUDA GPU is available")
        return torch.device(self.device)

    @property
    def rotates_keys(self) -> bool:
        """q and k go through the Hadamard rotation (zipage/layers/key_rotation.py)."""
        return self.kv_cache_dtype == "fp8" and self.fp8_key_rotation is not False

    def kv_dtype(self, model_dtype: torch.dtype) -> torch.dtype:
        """dtype of the K/V cache tensors."""
        return torch.float8_e4m3fn if self.kv_cache_dtype == "fp8" else model_dtype

    def torch_dtype(self, device: torch.device) -> torch.dtype:
        if self.dtype == "auto":
            return torch.bfloat16 if device.type == "cuda" else torch.float32
        try:
            return {"bfloat16": torch.bfloat16, "float16": torch.float16,
                    "float32": torch.float32}[self.dtype]
        except KeyError:
            raise ValueError(f"unsupported dtype {self.dtype!r}") from None
