"""How many paged-decode programs an SM holds, from a compile on the CPU (no GPU needed):
Triton compiles the split kernel for an sm_90 target; its shared memory and registers per
program bound the programs resident per SM, the wave of the cost model's decode waves
(zipage/sim/decode_waves.py). A diagnostic next to the fit, not used by it.

    python -m zipage.sim.decode_occupancy            # bf16 cache, fp8, fp8 with e4m3 MMAs

It also counts the instructions of the K/V loop (the first loop of the SASS: full tiles),
per tile and per key, and its conversions (F2FP) and MMAs, since on the H200 the FP8 decode
was bound by issuing them rather than by bytes (docs/fp8.md).

Limits assumed (H100 / H200, compute capability 9.0): 228 KiB shared memory per SM with
1 KiB reserved per block, 65,536 registers per SM allocated per warp in units of 256, at
most 32 blocks per SM. The Triton version here may differ from the GPU machine's: the
counts are the kernel's as this Triton compiles it.
"""
import argparse
import inspect
import re
import subprocess
from pathlib import Path

SMEM_PER_SM = 228 * 1024
SMEM_RESERVED_PER_BLOCK = 1024
REGS_PER_SM = 65536
MAX_BLOCKS_PER_SM = 32


def engine_launch(fp8: bool):
    """The split kernel's decode launch for this cache (paged_decode / fp8_launch). An FP8
    cache's default is now the flat kernel (fp8_decode_flat.py), which this diagnostic does
    not compile: FP8_DECODE_SPLIT, the launch it replaced, stands for FP8 here."""
    from zipage.kernels.fp8_launch import FP8_DECODE_SPLIT
    from zipage.kernels.paged_decode import _DECODE
    return FP8_DECODE_SPLIT if fp8 else _DECODE


def compile_split_kernel(fp8: bool, launch=None):
    """The compiled kernel as ``paged_decode_attention`` launches it in the engine for
    Qwen3-8B's shape (GROUP 4, head dim 128, block 256; ``launch``: the engine's by default,
    an FP8 cache with V stored transposed), with the 16-byte alignment the launcher's
    specialisation gives pointers and strides."""
    from zipage.kernels.fp8 import FP8_DTYPE
    from zipage.kernels.fp8_decode_mma import _split_e4m3_kernel, e4m3_group_pad
    from zipage.kernels.paged_decode_split import _split_kernel
    from zipage.kernels.paged_tiles import dot_args
    launch = launch or engine_launch(fp8)
    e4m3 = launch.operand == FP8_DTYPE
    kernel = _split_e4m3_kernel if e4m3 else _split_kernel
    kv = "*fp8e4nv" if fp8 else "*bf16"
    types = {"q_ptr": "*bf16", "out_ptr": "*bf16", "k_cache_ptr": kv, "v_cache_ptr": kv,
             "k_scale_ptr": "*fp32" if fp8 else kv, "v_scale_ptr": "*fp32" if fp8 else kv,
             "block_tables_ptr": "*i32", "context_lens_ptr": "*i32", "qk_scale": "fp32"}
    constexprs = dict(DIRECT=False, GROUP=4, HEAD_DIM=128, BLOCK_SIZE=256,
                      TILE_N=launch.tile_n,
                      GROUP_PAD=e4m3_group_pad(4) if e4m3 else 16, HEAD_DIM_PAD=128)
    if not e4m3:
        operand = dot_args(launch.operand)
        constexprs.update(DOT_DTYPE=operand["DOT_DTYPE"], DOT_PREC=operand["DOT_PREC"],
                          QUANT=fp8, V_IN_REGISTERS=fp8 and launch.v_in_registers, V_T=fp8)
    options = dict(num_warps=launch.num_warps, num_stages=launch.num_stages)
    if launch.maxnreg is not None:
        options["maxnreg"] = launch.maxnreg
    return compile_for_sm90(kernel, types, constexprs, options)


def compile_for_sm90(kernel, types: dict, constexprs: dict, options: dict):
    """`kernel` (a @triton.jit decode kernel) compiled for sm_90 with these argument types
    (others: "*fp32" for partial_* pointers, "i32"), constexprs and compile options, and the
    16-byte alignment the launcher's specialisation gives pointers, strides and num_q_heads
    (not stride_table_row: do_not_specialize)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    names = list(inspect.signature(kernel.fn).parameters)
    missing = [n for n in names if n.isupper() and n not in constexprs]
    if missing:  # a new constexpr of the kernel must be decided here, not defaulted
        raise RuntimeError(f"no value for the constexprs {missing} of {kernel.fn.__name__}")
    signature, attrs = {}, {}
    for i, n in enumerate(names):
        signature[n] = ("constexpr" if n in constexprs else types.get(n) or
                        ("*fp32" if n.startswith("partial") else "i32"))
        if (n.endswith("_ptr") or n.startswith("stride") or n == "num_q_heads") and \
                n != "stride_table_row":
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=kernel, signature=signature, attrs=attrs,
                    constexprs={(names.index(k),): v for k, v in constexprs.items()})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def cuobjdump(kernel, flag: str) -> str:
    """cuobjdump (bundled with Triton) `flag` output on the kernel's cubin."""
    import tempfile

    import triton
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.asm["cubin"])
        f.flush()
        return subprocess.run([str(tool), flag, f.name], check=True, capture_output=True,
                              text=True).stdout


def registers_and_stack(kernel) -> tuple[int, int]:
    """Registers per thread, and bytes of stack per thread: registers spilled under a maxnreg
    cap (0 without spills). One cuobjdump run for both."""
    usage = cuobjdump(kernel, "--dump-resource-usage")
    return tuple(int(usage.split(f"{name}:")[1].split()[0]) for name in ("REG", "STACK"))


SASS_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def sass(kernel) -> list[tuple[int, str, str, str]]:
    """The kernel's SASS as (address, predicate or "", opcode with modifiers, operands)."""
    return [(int(a, 16), pred, op, args)
            for a, pred, op, args in SASS_LINE.findall(cuobjdump(kernel, "-sass"))]


def branch_target(args: str) -> int | None:
    """The address in a branch's operands, None if it has none."""
    target = re.search(r"0x([0-9a-f]+)", args)
    return int(target.group(1), 16) if target else None


def first_loop_opcodes(kernel) -> list[str]:
    """Opcodes (without modifiers) of the first loop of the kernel's SASS: the instructions
    from the target of the first backward branch to that branch."""
    lines = sass(kernel)
    for addr, _, op, args in lines:
        target = branch_target(args) if op == "BRA" else None
        if target is not None and target < addr:
            return [o.split(".")[0] for a, _, o, _ in lines if target <= a <= addr]
    return []


def programs_per_sm(shared_bytes: int, regs_per_thread: int, num_warps: int = 4) -> dict:
    per_warp = -(-regs_per_thread * 32 // 256) * 256
    by_regs = REGS_PER_SM // (per_warp * num_warps)
    by_smem = SMEM_PER_SM // (shared_bytes + SMEM_RESERVED_PER_BLOCK)
    return {"by_shared_memory": by_smem, "by_registers": by_regs,
            "programs_per_sm": min(by_smem, by_regs, MAX_BLOCKS_PER_SM)}


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    from dataclasses import replace

    from zipage.kernels.fp8 import FP8_DTYPE
    from zipage.kernels.fp8_launch import E4M3_DECODE, FP8_DECODE_OCCUPANCY
    launches = [(False, engine_launch(False)), (True, engine_launch(True)), (True, E4M3_DECODE),
                (True, replace(E4M3_DECODE, tile_n=64, num_stages=3))]
    for fp8, launch in launches + [(True, o) for o in FP8_DECODE_OCCUPANCY]:
        name = ("fp8 cache" if fp8 else "bf16 cache") + (
            ", e4m3 MMAs" if launch.operand == FP8_DTYPE else "")
        k = compile_split_kernel(fp8, launch)
        regs, stack = registers_and_stack(k)
        occ = programs_per_sm(k.metadata.shared, regs, launch.num_warps)
        loop = first_loop_opcodes(k)
        cap = "" if launch.maxnreg is None else (
            f", maxnreg {launch.maxnreg}, {stack} B spilled per thread")
        warps = f"{launch.num_warps} warp" + ("s" if launch.num_warps > 1 else "")
        print(f"{name} ({launch.tile_n} keys per tile, {warps}, "
              f"{launch.num_stages} stages{cap}): {k.metadata.shared} B shared memory, {regs} "
              f"registers per thread -> {occ['by_shared_memory']} programs per SM by shared "
              f"memory, {occ['by_registers']} by registers: {occ['programs_per_sm']}; K/V "
              f"loop {len(loop)} instructions per tile "
              f"({len(loop) * launch.num_warps / launch.tile_n:.1f} warp instructions per "
              f"key), {loop.count('F2FP')} conversions, "
              f"{sum(o.endswith('MMA') for o in loop)} MMAs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
