"""Launch parameters of the attention kernels on an FP8 cache, picked for FP8 bytes.

An FP8 K/V tile is half the bytes of a bf16 one, so the tiles and pipelines that hide the
latency of bf16 loads are too small here: the FP8 defaults take twice the keys per tile and
a deeper pipeline. Every value can be overridden per call (the wrappers' tile_n, num_warps,
num_stages, fp8_operand, fp8_v_in_registers arguments), which is how
scripts/throughput/fp8_kernels.py compares variants on the GPU. The decode default is the
flat kernel (fp8_decode_flat.py), 4 programs per SM (a register cap of 128), 2 stages, with
the split counts flat_num_splits gives for them (1 at both shapes below): on the H200
95.0% / 96.5% of the FP8 byte roofline at 512 x 2048 / 64 x 16384, against 87.1% / 89.8%
for 3 per SM (the default until 2026-12-06, at its 2 / 3 splits) and the split kernel's
81.5% / 84.6% (FP8_DECODE_SPLIT; docs/fp8.md); on an H100 94.6% / 94.6% against 90.1% /
93.4% and 81.0% / 82.9%. Where the flat kernel cannot read a cache (V in rows, a block size
tile_n does not divide) the split kernel runs.

V layout: the engine's FP8 V cache is stored transposed per block (fp8.transposed_v_view),
read like K (keys contiguous): decode at 78% / 82% of the FP8 byte roofline at 512 x 2048 /
64 x 16384 on the H200, against 61% / 68% for V in rows (docs/fp8.md). v_in_registers only
applies to a V cache in rows (fp8_tiles.weighted_v_operand): slower for decode (51% vs 61%),
faster for prefill (1.54 vs 1.69 ms at 8 x 512 over 4,096 cached), so each kernel's default
for rows is its faster one. The engine's prefill reads V transposed (1.69 ms): one layout.

operand: the tl.dot operand type of the e4m3 tiles (and of q and P). float16 is one
hardware conversion per two elements on sm_89+ and keeps 10 mantissa bits for P; it needs
|q| < 65504 (queries beyond f16's range, unusual for normed queries, need bfloat16).
float32 queries keep float32 operands (exact; the CPU interpreter tests use them).
Decode alone also takes FP8_DTYPE: e4m3 tensor-core MMAs on the cache bytes, no conversion,
keys as the MMA's rows (fp8_decode_mma.py; V must be stored transposed). On the H200 it
reads 0.99x / 1.02x the default at 512 x 2048 / 64 x 16384 (docs/fp8.md): not the default.
"""
import os
from dataclasses import dataclass, fields, replace

import torch

from zipage.kernels.fp8 import FP8_DTYPE

OPERAND_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
DECODE_OPERANDS = OPERAND_DTYPES + (FP8_DTYPE,)


@dataclass(frozen=True)
class Launch:
    """One kernel variant: dot operand type, keys per tile, warps, pipeline stages,
    (prefill) query rows per tile, for an FP8 V cache in rows whether the weighted V
    operand is made in registers (fp8_tiles.weighted_v_operand; False: read as bytes), and
    (decode) a cap on registers per thread, Triton's maxnreg: None lets the compiler choose;
    a lower cap fits more programs per SM, paid in spills (decode_occupancy prints both);
    (decode) programs_per_sm: None or 0 runs the split kernel, a program per (request, KV
    head, split); a number, the flat kernel (fp8_decode_flat.py) with that many per SM."""
    operand: torch.dtype
    tile_n: int
    num_warps: int
    num_stages: int
    tile_m: int | None = None
    v_in_registers: bool = True
    maxnreg: int | None = None
    programs_per_sm: int | None = None


DECODE_LAUNCH_ENV = "ZIPAGE_FP8_DECODE_LAUNCH"
_INT_FIELDS = ("tile_n", "num_warps", "num_stages", "maxnreg", "programs_per_sm")


def launch_from_text(default: Launch, text: str) -> Launch:
    """`default` with "tile_n=128,num_stages=2,maxnreg=128" applied: integer fields only,
    each name checked, so a typo fails instead of timing the default under another name."""
    given = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in _INT_FIELDS or not value.strip().isdigit():
            raise ValueError(f"{DECODE_LAUNCH_ENV}: {item!r} is not NAME=INTEGER with NAME one "
                             f"of {', '.join(_INT_FIELDS)}")
        given[name.strip()] = int(value)
    assert set(_INT_FIELDS) <= {f.name for f in fields(Launch)}
    return replace(default, **given)


def launch_text(values: dict) -> str:
    """The inverse of `launch_from_text`: "tile_n=128,num_warps=2,..." for the integer fields
    `values` sets (a Launch's fields or a sweep row), in the order the parser names them."""
    return ",".join(f"{name}={values[name]}" for name in _INT_FIELDS
                    if values.get(name) is not None)


# The split kernel's launch (a program per request, KV head and split), the default until the
# flat kernel: on an H100 the flat kernel reads 90.1% / 93.4% of the byte roofline at
# 512 x 2048 / 64 x 16384 against its 81.0% / 82.9% (docs/fp8.md; the H200 is not yet measured).
FP8_DECODE_SPLIT = Launch(torch.float16, tile_n=128, num_warps=4, num_stages=3,
                          v_in_registers=False)
_FP8_DECODE_CODE = replace(FP8_DECODE_SPLIT, num_stages=2, programs_per_sm=4)
# The FP8 decode launch; ZIPAGE_FP8_DECODE_LAUNCH overrides it for a benchmark process (a
# candidate from the sweep timed in the engine without an edit; the runs record it).
FP8_DECODE = launch_from_text(_FP8_DECODE_CODE, os.environ.get(DECODE_LAUNCH_ENV, ""))
# Candidates with more programs per SM (the sweep's occupancy rows; docs/fp8.md): 2 stages
# need 41 KiB of shared memory, so registers bind; a cap of 128 gives 4 per SM, 96 gives 5.
# Fewer warps per program: fewer cross-warp reductions per tile (8 warps read far slower
# than 4), 8 one-warp or 4 two-warp programs per SM.
FP8_DECODE_OCCUPANCY = tuple(replace(FP8_DECODE_SPLIT, **changes) for changes in (
    dict(num_stages=2, maxnreg=128), dict(num_stages=2, maxnreg=96),
    dict(tile_n=64, maxnreg=96), dict(tile_n=64, num_warps=1, num_stages=2),
    dict(num_warps=2, num_stages=2)))
# The flat kernel's other launches (fp8_decode_flat.py: one loop over all the tiles of a
# program's items, so the load pipeline fills once per program, not once per item). Two
# warps: 22.1 warp instructions per key against the default's 26.5, with no spills
# (python -m zipage.sim.flat_occupancy), a candidate where energy per call binds.
FP8_DECODE_FLAT = tuple(replace(_FP8_DECODE_CODE, **changes) for changes in (
    dict(num_stages=3), dict(programs_per_sm=3), dict(programs_per_sm=2, num_stages=3),
    dict(programs_per_sm=1, tile_n=256), dict(num_warps=2)))
# decode with e4m3 MMAs (fp8_decode_mma.py): 2 stages keep 3 programs per SM (73 KiB each)
E4M3_DECODE = Launch(FP8_DTYPE, tile_n=128, num_warps=4, num_stages=2, v_in_registers=False)
FP8_PREFILL = Launch(torch.float16, tile_n=64, num_warps=8, num_stages=3, tile_m=128)
# score: 32 keys, 2 stages measured 2.09 ms against 2.44 for 64 keys, 3 stages on the H200
# (4 layers x 64 requests x 2,304 keys; bf16 1.59; docs/fp8.md)
FP8_SCORE = Launch(torch.float16, tile_n=32, num_warps=4, num_stages=2)


def resolve_launch(default: Launch, q_dtype: torch.dtype, operand=None,
                   operands=OPERAND_DTYPES, **overrides) -> Launch:
    """`default` with the non-None `overrides` (tile_n, num_warps, ...) and the operand
    type: `operand` if given (one of `operands`), float32 for float32 queries, else
    default.operand."""
    if operand is None:
        operand = torch.float32 if q_dtype == torch.float32 else default.operand
    if operand not in operands:
        raise ValueError(f"fp8_operand must be one of {operands}, got {operand}")
    given = {name: value for name, value in overrides.items() if value is not None}
    return replace(default, operand=operand, **given)


def check_no_fp8_options(cache_dtype: torch.dtype, **options) -> None:
    """fp8_operand and fp8_v_in_registers only mean something for an FP8 cache: reject
    them (when given) elsewhere."""
    given = sorted(name for name, value in options.items() if value is not None)
    if given and cache_dtype != FP8_DTYPE:
        raise ValueError(f"{', '.join(given)}: for an fp8 cache; this cache is {cache_dtype}")


def check_v_path(v_transposed: bool, v_in_registers) -> None:
    """fp8_v_in_registers=True picks a path of a V cache in rows: refuse it for V stored
    transposed (fp8.transposed_v_view) rather than ignore it."""
    if v_transposed and v_in_registers:
        raise ValueError("fp8_v_in_registers: for a V cache in rows; this one is transposed")


def launch_for(quant: bool, fp8_default: Launch, default: Launch, q_dtype: torch.dtype,
               cache_dtype: torch.dtype, fp8_operand=None, operands=OPERAND_DTYPES,
               **overrides) -> Launch:
    """The launch of a kernel over an FP8 cache (quant; fp8_operand one of `operands`) or a
    full-precision one, whose operand is the cache dtype; fp8_operand and v_in_registers are
    refused for the latter."""
    if quant:
        return resolve_launch(fp8_default, q_dtype, fp8_operand, operands, **overrides)
    check_no_fp8_options(cache_dtype, fp8_operand=fp8_operand,
                         fp8_v_in_registers=overrides.pop("v_in_registers", None))
    return resolve_launch(default, q_dtype, cache_dtype, **overrides)
