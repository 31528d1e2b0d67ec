"""Waves of the split-K decode kernel: why a step's KV costs more per token at some batch
sizes than at others (docs/throughput_model.md, "Decode waves").

The paged decode kernel (zipage/kernels/paged_decode.py) launches one program per (row, KV
head, split). The GPU holds ``programs_per_sm`` of them per SM at once (shared memory
limits it: 5 for the bf16 kernel on the H200), so the launch runs in waves of P = SMs x
programs_per_sm programs. Programs read equal shares of a row's KV. While at least
``saturating_programs`` (M) programs run, they share the copy bandwidth; a last wave of
fewer runs at its programs' own speed, as if it held M. Step KV time is then
``c_kv x tokens x waste(N)`` with N the programs that have work and

    waste(N) = ((waves - 1) * P + max(last, M)) / N,   waves = ceil(N / P), last = N - (waves-1) P

M = 0 means no waste: the model without waves. The split count (and so N) depends on the
batch the kernel sees: decode-only steps replay CUDA graphs padded to the captured sizes,
steps with a prefill run eagerly at their own size.

An FP8 cache's decode is now by default the flat kernel (zipage/kernels/fp8_decode_flat.py):
4 programs per SM (3 until 2026-12-06), each looping over several items, so no waves; its
tail is the busiest program's extra item. The FP8 calibration predates it (docs/status.md): refit it on the GPU,
where M near 0 would say the waves are gone.
"""
from dataclasses import dataclass, fields, replace

from zipage.sim.features import StepFeatures
from zipage.worker.cuda_graph import _capture_sizes as capture_sizes

# default_num_splits in zipage/kernels/paged_decode.py: programs for 4 per SM, at most 64
# splits (tests/sim/test_decode_waves.py checks this copy against it).
TARGET_PROGRAMS_PER_SM = 4
MAX_SPLITS = 64


def num_splits(batch: int, kv_heads: int, sms: int) -> int:
    """Key-range splits per (row, KV head) of a decode launch of ``batch`` rows (its context
    long enough that no split is empty)."""
    want = -(-TARGET_PROGRAMS_PER_SM * sms // max(1, batch * kv_heads))
    return max(1, min(want, MAX_SPLITS))


@dataclass(frozen=True)
class DecodeWaves:
    sms: int  # streaming multiprocessors of the calibrated GPU
    kv_heads: int  # of the calibrated model
    programs_per_sm: int  # decode programs resident per SM (fitted: docs)
    saturating_programs: int  # M: programs that keep the copy bandwidth busy (fitted)
    # The engine's options, not calibrated: set by ``for_engine`` for each simulated engine.
    max_num_seqs: int = 512
    enforce_eager: bool = False

    CALIBRATED = ("sms", "kv_heads", "programs_per_sm", "saturating_programs")

    def __post_init__(self):
        if min(self.sms, self.kv_heads, self.programs_per_sm) < 1:
            raise ValueError(f"decode waves: sms, kv_heads and programs_per_sm must be >= 1 "
                             f"({self})")
        if not 0 <= self.saturating_programs <= self.wave:
            raise ValueError(f"decode waves: saturating_programs {self.saturating_programs} "
                             f"must lie in [0, {self.wave}] (one wave)")

    @property
    def wave(self) -> int:
        """P: programs resident on the whole GPU at once."""
        return self.sms * self.programs_per_sm

    def for_engine(self, max_num_seqs: int, enforce_eager: bool) -> "DecodeWaves":
        return replace(self, max_num_seqs=max_num_seqs, enforce_eager=enforce_eager)

    def launch_batch(self, f: StepFeatures) -> int:
        """Rows the decode kernel is launched with: the CUDA graph's padded batch for a
        decode-only step, the rows themselves for an eager one."""
        n = f.decode_rows
        if f.is_mixed or self.enforce_eager or n > self.max_num_seqs:
            return n
        return next(s for s in capture_sizes(self.max_num_seqs) if s >= n)

    def programs(self, f: StepFeatures) -> int:
        """Programs with work: padded rows have no context and end at once."""
        if f.decode_rows == 0:
            return 0
        return f.decode_rows * self.kv_heads * num_splits(self.launch_batch(f), self.kv_heads,
                                                          self.sms)

    def waste(self, f: StepFeatures) -> float:
        """waste(N) of the module docstring, >= 1."""
        n = self.programs(f)
        if n == 0:
            return 1.0
        waves = -(-n // self.wave)
        last = n - (waves - 1) * self.wave
        return ((waves - 1) * self.wave + max(last, self.saturating_programs)) / n

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.CALIBRATED}

    @classmethod
    def from_dict(cls, d: dict) -> "DecodeWaves":
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - set(cls.CALIBRATED))
        if unknown:
            raise ValueError(f"decode waves: unknown keys {unknown} (known: "
                             f"{list(cls.CALIBRATED)}; {sorted(known - set(cls.CALIBRATED))} "
                             f"are the engine's, not the calibration's)")
        missing = [k for k in cls.CALIBRATED if k not in d]
        if missing:
            raise ValueError(f"decode waves: {missing} missing")
        return cls(**{k: int(d[k]) for k in cls.CALIBRATED})

    def describe(self) -> str:
        return (f"{self.programs_per_sm} programs per SM x {self.sms} SMs = waves of "
                f"{self.wave}; a last wave of fewer than {self.saturating_programs} costs as "
                f"many")

