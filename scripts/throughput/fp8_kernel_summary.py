"""What `bench fp8-kernels` prints: one line per timed variant, then per shape the best
FP8 variant next to bf16, and the labelled rows (the e4m3 decode, the occupancy launches)
against the default. Rows whose output is wrong or unchecked are never picked."""
E4M3_LABEL = "e4m3 MMAs (E4M3_DECODE)"  # the row the summary sets against the default
OCCUPANCY_LABEL = "more programs per SM"  # fp8_launch.FP8_DECODE_OCCUPANCY's rows
FLAT_LABEL = "flat loop"  # fp8_launch.FP8_DECODE_FLAT's rows (fp8_decode_flat.py)
SPLIT_LABEL = "split kernel, the former default"  # fp8_launch.FP8_DECODE_SPLIT
# A variant whose output is further than this from the fp32 reference (max error over the
# largest output) is wrong, not slow: its time is reported but never picked or compared. The
# FP8 variants that compute correctly land at 1.6e-3 to 3.3e-3 on these inputs.
MAX_REL_ERR = 1e-2


def print_row(row):
    what = row["kind"] if row["kind"] == "bf16" else (
        f"fp8 {row['operand']:<4} tile {row['tile_n']:>3} warps {row['num_warps']} "
        f"stages {row['num_stages']} splits {row['splits']:>2} "
        f"V {row['v_path']}"
        + (f" maxnreg {row['maxnreg']}" if row.get("maxnreg") else "")
        + (f" {row['programs_per_sm']}/SM" if row.get("programs_per_sm") else "")
        + (f" ({row['label']})" if row.get("label") else ""))
    if "error" in row:
        print(f"  {what:<66} {row['error']}", flush=True)
        return
    energy = (f"  {row['mj_per_call']:.3f} mJ/call at {row['watts']:.0f} W, "
              f"{row['sm_mhz']} MHz" if "mj_per_call" in row else "")
    err = row.get("rel_err", float("nan"))  # missing where the output check raised
    print(f"  {what:<66} {row['ms']:8.3f} ms {row['gbps']:8.1f} GB/s "
          f"{row['pct_roofline']:5.1f}% of its byte roofline  err {err:.1e}"
          + ("" if row.get("correct") else "  WRONG OUTPUT") + energy, flush=True)


def summary(decode, shapes):
    print("\nbest FP8 variant per shape, and the bf16 kernel at the same shape:")
    best = {}
    for name in shapes:
        rows = [r for r in decode if r["workload"].startswith(f"decode ({name})") and "ms" in r]
        wrong = [r for r in rows if not r.get("correct")]
        rows = [r for r in rows if r.get("correct")]
        if wrong:
            print(f"  decode ({name}): {len(wrong)} variant(s) with wrong or unchecked output "
                  f"left out (error over {MAX_REL_ERR:g}, or the check raised)")
        fp8 = min((r for r in rows if r["kind"] == "fp8"), key=lambda r: r["ms"], default=None)
        bf16 = next((r for r in rows if r["kind"] == "bf16"), None)
        if fp8 is None or bf16 is None:
            print(f"  decode ({name}): no successful run to compare")
            continue
        best[name] = dict(fp8=fp8, bf16=bf16, speedup=bf16["ms"] / fp8["ms"])
        print(f"  {fp8['workload']}")
        for r in (fp8, bf16):
            print_row(r)
        print(f"    fp8 / bf16 speed-up {bf16['ms'] / fp8['ms']:.2f}x")
        labelled = {r.get("label"): r for r in rows}
        default, e4m3 = labelled.get("default"), labelled.get(E4M3_LABEL)
        if default and not e4m3 and any(r.get("label") == E4M3_LABEL for r in wrong):
            print("    e4m3 MMAs: wrong output, no comparison")
        if default and e4m3:  # the decision the sixth forecast names (results/bench/)
            best[name]["e4m3_over_default"] = default["ms"] / e4m3["ms"]
            print(f"    e4m3 MMAs {e4m3['pct_roofline']:.1f}% vs the default's "
                  f"{default['pct_roofline']:.1f}% of the byte roofline: "
                  f"{default['ms'] / e4m3['ms']:.2f}x per call")
        for label, key, extra in ((SPLIT_LABEL, "split_over_default", "programs_per_sm"),
                                  (OCCUPANCY_LABEL, "occupancy_over_default", "maxnreg"),
                                  (FLAT_LABEL, "flat_over_default", "programs_per_sm")):
            against = [r for r in rows if r.get("label") == label] if default else []
            if against:
                best[name][key] = [default["ms"] / r["ms"] for r in against]
            for r in against:
                print(f"    tile {r['tile_n']}, {r['num_warps']} warps, {r['num_stages']} "
                      f"stages, {extra} {r[extra]}, splits {r['splits']}: "
                      f"{r['pct_roofline']:.1f}% vs the default's "
                      f"{default['pct_roofline']:.1f}%: {default['ms'] / r['ms']:.2f}x per call")
    return best
