#!/usr/bin/env python3
"""The targets table of issue 31 (bench/RESULTS.md, "compare-log: the fidelity suite"): for every log of
tests/fidelity/, `tessera compare-log --json` with the log's options from tests/fidelity/expected.txt, and one
Markdown row: printed vs predicted model / KV / compute per device, nodes, splits, and whether every predicted
figure is within issue 31's targets (0.5 % model and KV, 10 % compute, 2 % nodes, equal splits).

Usage: bench/tools/fidelity_table.py BUILD_DIR   (e.g. build/default; its fixtures/ folder holds the GGUF fixtures)
"""
import json
import os
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cell(figures, kind):
    parts = []
    for f in figures:
        if f["kind"] != kind:
            continue
        dev = f["device"] or kind
        if f["predicted"] is None:
            parts.append(f"{dev} {f['printed']:.2f} / n/p")
        else:
            parts.append(f"{dev} {f['printed']:.2f} / {f['predicted']:.2f} ({f['percent']:+.2f} %)")
    return "<br>".join(parts) if parts else "–"


def count(figures, kind):
    for f in figures:
        if f["kind"] == kind:
            if f["predicted"] is None:
                return f"{f['printed']:.0f} / n/p"
            return f"{f['printed']:.0f} / {f['predicted']:.0f}"
    return "–"


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/default"
    tool = os.path.join(build, "tools/tessera/tessera")
    fixtures = os.path.join(build, "fixtures")
    print("| log | model MiB (printed / predicted) | KV MiB | compute MiB | failed allocation MiB | nodes | splits "
          "| predicted | within target | what is missing |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for line in open(os.path.join(ROOT, "tests/fidelity/expected.txt")):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line.replace("@FIXTURES@", fixtures))
        log, options = words[0], words[2:]
        # The targets, not the log's own tolerance: drop --tolerance and the like.
        kept, skip = [], False
        for w in options:
            if skip:
                skip = False
                continue
            if w.endswith("-tolerance") or w == "--tolerance":
                skip = True
                continue
            kept.append(w)
        out = subprocess.run([tool, "compare-log", "--json", os.path.join(ROOT, "tests/fidelity", log)] + kept,
                             capture_output=True, text=True)
        p = json.loads(out.stdout)["prediction"]
        figs = p["figures"]
        fails = [f for f in figs if f["kind"].startswith("failed")]
        failed = "<br>".join(
            f"{f['device']} {f['printed']:.2f} / " + ("n/p" if f["predicted"] is None else f"{f['predicted']:.2f}")
            for f in fails) or "–"
        within = "–" if p["predicted"] == 0 else ("yes" if p["off"] == 0 else f"no ({p['off']} off)")
        missing = sorted({f["missing"] for f in figs if f["predicted"] is None})
        short = "; ".join(m[:160] + ("…" if len(m) > 160 else "") for m in missing) or "–"
        print(f"| {log[:2]} | {cell(figs, 'model')} | {cell(figs, 'KV')} | {cell(figs, 'compute')} | {failed} "
              f"| {count(figs, 'graph nodes')} | {count(figs, 'graph splits')} | {p['predicted']}/{len(figs)} "
              f"| {within} | {short} |")


if __name__ == "__main__":
    main()
