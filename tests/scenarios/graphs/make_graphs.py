#!/usr/bin/env python3
"""Writes the hand-designed graphs of the anchor-defect scenarios (tests/scenarios/*.json name them with "graph").

Run from anywhere: python3 tests/scenarios/graphs/make_graphs.py. The output is deterministic; the files are
committed, so the scenarios do not need Python.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", x))[0]


class G:
    def __init__(self, description):
        self.description = description
        self.tensors = []

    def t(self, name, ne, op="NONE", src=None, op_params=None, flags=None, role=None, typ="f32"):
        d = {"id": len(self.tensors), "name": name, "type": typ, "ne": ne, "op": op}
        if op_params:
            d["op_params"] = op_params
        if src is not None:
            d["src"] = src
        if op == "RESHAPE":
            d["view_src"] = src[0]
        if flags:
            d["flags"] = flags
        if role:
            d["role"] = role
        self.tensors.append(d)
        return d["id"]

    def write(self, name):
        doc = {"format": "tessera-graph", "version": 1, "description": self.description, "tensors": self.tensors}
        lines = ",\n".join("    " + json.dumps(t, separators=(",", ":")) for t in self.tensors)
        text = ('{\n  "format": "tessera-graph",\n  "version": 1,\n  "description": %s,\n  "tensors": [\n%s\n  ]\n}\n'
                % (json.dumps(self.description), lines))
        assert json.loads(text) == doc
        with open(os.path.join(HERE, name), "w") as f:
            f.write(text)


def fan_in_40():
    # Forty per-layer inputs computed on the CPU (from CPU weights), then forty layers on the GPU, layer i adding
    # per-layer input i: the GPU's first split would need 41 inputs (40 + the hidden state), over the cap of 30.
    n, d, tok = 40, 64, 4
    g = G("Split-input fan-in: 40 per-layer inputs produced on the CPU feed 40 GPU layers")
    x = g.t("inp", [d, tok], flags=["input"], role="input")
    pl = [g.t("per_layer_proj.%d" % i, [d, d], role="weight") for i in range(n)]
    w = [g.t("blk.%d.ffn.weight" % i, [d, d], role="weight") for i in range(n)]
    pin = [g.t("pl_inp-%d" % i, [d, tok], op="MUL_MAT", src=[pl[i], x]) for i in range(n)]
    h = x
    for i in range(n):
        m = g.t("ffn-%d" % i, [d, tok], op="MUL_MAT", src=[w[i], h])
        h = g.t("l_out-%d" % i, [d, tok], op="ADD", src=[m, pin[i]],
                flags=["output"] if i == n - 1 else None)
    g.write("fan-in-40.json")


def fa_sinks():
    # Layer 0 on the CPU, layer 1 on the GPU; layer 1's attention has a tiny sinks weight kept on the CPU.
    d, dh, heads, n_kv = 32, 16, 2, 4
    g = G("Tiny auxiliary weight: FLASH_ATTN_EXT whose sinks weight [2] is on the CPU, between a CPU layer "
          "and a GPU layer")
    x = g.t("inp", [d, 1], flags=["input"], role="input")
    kvx = g.t("kv_inp", [d, n_kv], flags=["input"], role="input")
    w0 = g.t("blk.0.ffn.weight", [d, d], role="weight")
    wq = g.t("blk.1.attn_q.weight", [d, d], role="weight")
    wk = g.t("blk.1.attn_k.weight", [d, dh], role="weight")
    wv = g.t("blk.1.attn_v.weight", [d, dh], role="weight")
    sinks = g.t("blk.1.attn_sinks", [heads], role="weight")
    wo = g.t("blk.1.attn_output.weight", [d, d], role="weight")
    h1 = g.t("l_out-0", [d, 1], op="MUL_MAT", src=[w0, x])
    q = g.t("Qcur-1", [d, 1], op="MUL_MAT", src=[wq, h1])
    qr = g.t("Qcur-1 (reshaped)", [dh, 1, heads], op="RESHAPE", src=[q])
    k = g.t("Kcur-1", [dh, n_kv], op="MUL_MAT", src=[wk, kvx])
    v = g.t("Vcur-1", [dh, n_kv], op="MUL_MAT", src=[wv, kvx])
    fa = g.t("fattn-1", [dh, heads, 1], op="FLASH_ATTN_EXT", src=[qr, k, v, None, sinks],
             op_params=[f32_bits(0.25)])
    far = g.t("fattn-1 (reshaped)", [d, 1], op="RESHAPE", src=[fa])
    g.t("attn_out-1", [d, 1], op="MUL_MAT", src=[wo, far], flags=["output"])
    g.write("fa-sinks.json")


def chunk_growth(order, name, what):
    # Two graphs over the same two weights, on a GPU whose largest allocation is 4352 bytes, so that the compute
    # buffer comes in chunks. Both keep a 2 KiB and a 4 KiB product live at once; the first graph computes the small
    # one first, the next graph the large one first. Chunk 0 then holds the small one in the first plan and the large
    # one in the next plan: chunk 0 grows, chunk 1 shrinks by as much, and the total stays the same.
    g = G("Chunk growth: %s (the next graph grows chunk 0 of the compute buffer, not the total)" % what)
    x = g.t("inp", [1, 1], flags=["input"], role="input")
    w = {"small": g.t("blk.0.small.weight", [1, 512], role="weight"),
         "large": g.t("blk.0.large.weight", [1, 1024], role="weight")}
    rows = {"small": 512, "large": 1024}
    prod = {k: g.t("%s-0" % k, [rows[k], 1], op="MUL_MAT", src=[w[k], x]) for k in order}
    sums = {k: g.t("%s_sum-0" % k, [1, 1], op="SUM_ROWS", src=[prod[k]]) for k in order}
    g.t("out", [1, 1], op="ADD", src=[sums["small"], sums["large"]], flags=["output"])
    g.write(name)


if __name__ == "__main__":
    fan_in_40()
    fa_sinks()
    chunk_growth(["small", "large"], "chunk-growth-first.json", "the first graph")
    chunk_growth(["large", "small"], "chunk-growth-next.json", "the next graph")
