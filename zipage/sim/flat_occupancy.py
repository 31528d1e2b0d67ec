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
import inspect
import re

from zipage.sim.decode_occupancy import cuobjdump, programs_per_sm, registers_and_stack

_SASS = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def compile_flat_kernel(launch, direct: bool = True):
    """The flat kernel as paged_decode_attention launches it for Qwen3-8B's shape (group 4,
    head dim 128, block 256, bf16 queries) under `launch`; direct: one split (the output
    written normalised), else partials."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from zipage.kernels.fp8_decode_flat import ITEMS_PAD, _flat_kernel, flat_maxnreg
    from zipage.kernels.paged_tiles import dot_args
    names = list(inspect.signature(_flat_kernel.fn).parameters)
    types = {"q_ptr": "*bf16", "out_ptr": "*bf16", "k_cache_ptr": "*fp8e4nv",
             "v_cache_ptr": "*fp8e4nv", "k_scale_ptr": "*fp32", "v_scale_ptr": "*fp32",
             "block_tables_ptr": "*i32", "context_lens_ptr": "*i32", "qk_scale": "fp32"}
    constexprs = dict(DIRECT=direct, GROUP=4, HEAD_DIM=128, BLOCK_SIZE=256,
                      TILE_N=launch.tile_n, GROUP_PAD=16, ITEMS=ITEMS_PAD,
                      **dot_args(launch.operand))
    missing = [n for n in names if n.isupper() and n not in constexprs]
    if missing:
        raise RuntimeError(f"flat_occupancy: no value for the kernel's {missing}")
    unspecialised = ("stride_table_row", "num_splits", "num_items", "num_programs")
    signature, attrs = {}, {}
    for i, n in enumerate(names):
        signature[n] = ("constexpr" if n in constexprs else types.get(n) or
                        ("*fp32" if n.startswith("partial") else "i32"))
        if (n.endswith("_ptr") or n.startswith("stride") or n == "num_q_heads") and \
                n not in unspecialised:  # 16-aligned as the launcher specialises them
            attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=_flat_kernel, signature=signature, attrs=attrs,
                    constexprs={(names.index(k),): v for k, v in constexprs.items()})
    options = dict(num_warps=launch.num_warps, num_stages=launch.num_stages)
    if flat_maxnreg(launch) is not None:
        options["maxnreg"] = flat_maxnreg(launch)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def loop_paths(kernel) -> tuple[int, int]:
    """(instructions in the SASS's longest loop, those outside its predicated forward-branch
    blocks: the path of a tile that takes no branch)."""
    lines = [(int(a, 16), pred, op, args) for a, pred, op, args in _SASS.findall(
        cuobjdump(kernel, "-sass"))]
    loops = [(addr - int(t.group(1), 16), int(t.group(1), 16), addr)
             for addr, _, op, args in lines if op.startswith("BRA")
             for t in [re.search(r"0x([0-9a-f]+)", args)] if t and int(t.group(1), 16) < addr]
    _, start, end = max(loops)
    body = [line for line in lines if start <= line[0] <= end]
    skipped = set()
    for addr, pred, op, args in body:
        target = re.search(r"0x([0-9a-f]+)", args) if op.startswith("BRA") and pred else None
        if target and addr < int(target.group(1), 16) <= end:
            skipped |= {a for a, _, _, _ in body if addr < a < int(target.group(1), 16)}
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
