"""The flat FP8 decode kernel (zipage/kernels/fp8_decode_flat.py) compiled for sm_90 on the
CPU, as zipage/sim/decode_occupancy.py does for the split kernel: shared memory, registers
(under the cap its launch sets so programs_per_sm programs fit), spills, and the instructions
of its loop, in all and on the path of a tile that neither starts nor ends an item (the
instructions of the blocks behind predicated forward branches, the item change and the
output write, run once per item).

    python -m zipage.sim.flat_occupancy        # FP8_DECODE and the FP8_DECODE_FLAT launches

Same limits and caveats as decode_occupancy (this Triton may differ from the GPU machine's).
"""
import argparse

from zipage.sim.decode_occupancy import (branch_target, compile_for_sm90, programs_per_sm,
                                         registers_and_stack, sass)


def compile_flat_kernel(launch, direct: bool = True):
    """The flat kernel as paged_decode_attention launches it for Qwen3-8B's shape (group 4,
    head dim 128, block 256, bf16 queries) under `launch`; direct: one split (the output
    written normalised), else partials."""
    from zipage.kernels.fp8_decode_flat import ITEMS_PAD, _flat_kernel, flat_maxnreg
    from zipage.kernels.paged_tiles import dot_args
    types = {"q_ptr": "*bf16", "out_ptr": "*bf16", "k_cache_ptr": "*fp8e4nv",
             "v_cache_ptr": "*fp8e4nv", "k_scale_ptr": "*fp32", "v_scale_ptr": "*fp32",
             "block_tables_ptr": "*i32", "context_lens_ptr": "*i32", "qk_scale": "fp32"}
    constexprs = dict(DIRECT=direct, GROUP=4, HEAD_DIM=128, BLOCK_SIZE=256,
                      TILE_N=launch.tile_n, GROUP_PAD=16, ITEMS=ITEMS_PAD,
                      **dot_args(launch.operand))
    options = dict(num_warps=launch.num_warps, num_stages=launch.num_stages)
    if flat_maxnreg(launch) is not None:
        options["maxnreg"] = flat_maxnreg(launch)
    return compile_for_sm90(_flat_kernel, types, constexprs, options)


def loop_paths(kernel) -> tuple[int, int]:
    """(instructions in the SASS's longest loop, those outside its predicated forward-branch
    blocks: the path of a tile that takes no branch)."""
    lines = sass(kernel)
    branches = [(addr, pred, branch_target(args)) for addr, pred, op, args in lines
                if op.startswith("BRA") and branch_target(args) is not None]
    start, end = max(((target, addr) for addr, _, target in branches if target < addr),
                     key=lambda loop: loop[1] - loop[0])
    body = [addr for addr, _, _, _ in lines if start <= addr <= end]
    skipped = set()
    for addr, pred, target in branches:
        if pred and start <= addr < target <= end:
            skipped |= {a for a in body if addr < a < target}
    return len(body), len(body) - len(skipped)


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    from zipage.kernels.fp8_decode_flat import flat_maxnreg
    from zipage.kernels.fp8_launch import FP8_DECODE, FP8_DECODE_FLAT
    for launch in (FP8_DECODE, *FP8_DECODE_FLAT):
        for direct in (True, False):
            k = compile_flat_kernel(launch, direct)
            regs, stack = registers_and_stack(k)
            occ = programs_per_sm(k.metadata.shared, regs, launch.num_warps)
            total, common = loop_paths(k)
            print(f"flat, {launch.programs_per_sm} per SM, {launch.tile_n} keys, "
                  f"{launch.num_stages} stages, {'one split' if direct else 'splits'} "
                  f"(maxnreg {flat_maxnreg(launch)}): {k.metadata.shared} B shared memory, "
                  f"{regs} registers, {stack} B spilled -> {occ['programs_per_sm']} per SM; "
                  f"loop {total} instructions, {common} per tile on the common path")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
