"""Merge one config of another calibration file into a calibration (``bench calibrate
--merge``): a config whose grid crashed in the main call (zipage/b32 on the H200) and was
calibrated alone in a later call. Its fitted model and raw timings are copied as they are;
the file records where the config came from, and a merge refuses files of another GPU or
model (their step costs are not the same device's).
"""


def merge_configs(data: dict, other: dict, source: str, keys: list[str] | None = None,
                  note: str | None = None, log=print) -> list[str]:
    """Copy ``keys`` (default: every config of ``other``) from ``other`` into ``data`` in place;
    returns the merged keys. ``source`` names ``other`` (its path) in the provenance, ``note``
    says in words where it was measured."""
    for field in ("format", "gpu", "model"):
        if data.get(field) != other.get(field):
            raise ValueError(f"{source}: {field} {other.get(field)!r} differs from the base's "
                             f"{data.get(field)!r}: not the same device and model")
    keys = keys or sorted(other["models"])
    merged = data.setdefault("merged", [])
    for key in keys:
        if key not in other["models"]:
            raise ValueError(f"{source} has no config {key} (it has {sorted(other['models'])})")
        if key in data["models"]:
            raise ValueError(f"the base already has {key}: merging would replace a calibrated "
                             f"config")
        model = other["models"][key]
        model.setdefault("meta", {})["calibrated_in"] = source
        data["models"][key] = model
        if key in other.get("raw", {}):
            data.setdefault("raw", {})[key] = other["raw"][key]
        env = other.get("environment", {})
        merged.append({"config": key, "from": source, "gpu": other.get("gpu"),
                       "zipage_commit": env.get("zipage_commit"),
                       "copy_bandwidth_GBps": other.get("copy_bandwidth_GBps"),
                       "nvidia_smi": env.get("nvidia_smi"), "seconds": other.get("seconds"),
                       **({"note": note} if note else {})})
        log(f"== {key} merged from {source} ({other.get('gpu')}, commit "
            f"{env.get('zipage_commit')})")
    return keys
