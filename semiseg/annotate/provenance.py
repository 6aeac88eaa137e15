"""What made an annotation: the command line, annotate's options, the input files with
their sha256, the date, version, model hash, scheme and resolution (docs/outputs.md).

annotate writes it as ``PREFIX.json`` and, as ``# key: value`` lines, into the headers
of the GFF3 and the browser BED (OutputWriter's ``provenance``).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
import shlex
import sys


def sha256(path: str, chunk: int = 1 << 22) -> str:
    """The sha256 (hex) of the file at `path`."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _input(path: str | None) -> dict | None:
    if not path:
        return None
    return {"path": os.path.abspath(path), "sha256": sha256(path),
            "bytes": os.path.getsize(path)}


def _plain(v):
    """JSON-able copy of an option value."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)  # JSON has no NaN or infinity
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return str(v)


def collect(options: dict, *, version: str, model: str, model_hash: str, fasta: str | None,
            tracks: dict[str, str], regions: str | None, scheme: str, resolution: int,
            genetic_code, extra_inputs: dict[str, str | None] | None = None) -> dict:
    """The provenance of one annotate run. `options`: annotate's arguments as given
    (None: the model's own annotate setting); `tracks`: {name: path}; `genetic_code`: a
    codes.GeneticCode."""
    from ..checkpoint import resolve_model

    model_file = resolve_model(model)  # the file read: a shipped name, a run folder's best.pt
    if os.path.isdir(model_file):
        model_file = os.path.join(model_file, "best.pt")
    inputs = {"model": _input(model_file), "fasta": _input(fasta),
              "regions": _input(regions)}
    for k, v in (extra_inputs or {}).items():
        inputs[k] = _input(v)
    inputs = {k: v for k, v in inputs.items() if v is not None}
    inputs["tracks"] = {name: _input(p) for name, p in sorted(tracks.items())
                        if p and os.path.isfile(p)}
    return {
        "semiseg_version": version,
        "command": shlex.join(sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "model_hash": model_hash,
        "scheme": scheme,
        "resolution": resolution,
        "genetic_code": {"number": genetic_code.number, "name": genetic_code.name},
        "options": _plain(options),
        "inputs": inputs,
    }


def header_fields(prov: dict) -> dict[str, str]:
    """The provenance as one-line ``key: value`` pairs for file headers."""
    out = {"command": prov["command"], "date": prov["date"],
           "genetic_code": f"{prov['genetic_code']['number']} "
                           f"({prov['genetic_code']['name']})",
           "options": json.dumps(prov["options"], sort_keys=True)}
    if "options_in_effect" in prov:
        out["options_in_effect"] = json.dumps(prov["options_in_effect"], sort_keys=True)
    for k, v in prov["inputs"].items():
        if k == "tracks":
            for name, t in v.items():
                out[f"track {name}"] = f"{t['path']} sha256={t['sha256']}"
        else:
            out[k] = f"{v['path']} sha256={v['sha256']}"
    return out


def write_sidecar(path: str, prov: dict, files: list[str]) -> None:
    """PREFIX.json: the provenance and the files written (atomically)."""
    doc = dict(prov, files=[os.path.basename(f) for f in files])
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, path)
