"""Merge one config of another calibration file into a calibration (``bench calibrate
--merge``): a config whose grid crashed in the main call (zipage/b32 on the H200) and was
calibrated alone in a later call. Its fitted model and raw timings are copied as they are;
the file records where the config came from, and a merge refuses files of another GPU or
model (their step costs are not the same device's). A config the base already has is
replaced only when asked (``replace``: recalibrated after a kernel change); the record of
the config it replaces moves into the new one's.
"""


def merge_configs(data: dict, other: dict, source: str, keys: list[str] | None = None,
                  note: str | None = None, replace: bool = False, log=print) -> list[str]:
    """Copy ``keys`` (default: every config of ``other``) from ``other`` into ``data`` in place;
    returns the merged keys. ``source`` names ``other`` (its path) in the provenance, ``note``
    says in words where it was measured; ``replace`` lets a config of ``other`` replace the
    base's own."""
    for field in ("format", "gpu", "model"):
        if data.get(field) != other.get(field):
            raise ValueError(f"{source}: {field} {other.get(field)!r} differs from the base's "
                             f"{data.get(field)!r}: not the same device and model")
    keys = keys or sorted(other["models"])
    merged = data.setdefault("merged", [])
    for key in keys:
        if key not in other["models"]:
            raise ValueError(f"{source} has no config {key} (it has {sorted(other['models'])})")
        replaced = None
        if key in data["models"]:
            if not replace:
                raise ValueError(f"the base already has {key}: merging would replace a "
                                 f"calibrated config (--replace to recalibrate it)")
            earlier = [m for m in merged if m["config"] == key]
            merged[:] = [m for m in merged if m["config"] != key]
            replaced = (earlier[-1] if earlier else
                        {"config": key, "from": "the base's own grid",
                         "zipage_commit": data.get("environment", {}).get("zipage_commit")})
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
                       **({"note": note} if note else {}),
                       **({"replaces": replaced} if replaced else {})})
        log(f"== {key} {'replaced' if replaced else 'merged'} from {source} "
            f"({other.get('gpu')}, commit {env.get('zipage_commit')})")
    return keys
