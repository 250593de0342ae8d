// Hand-built graphs for scheduler tests, with a CPU-only reference and structural checks of a scheduler's splits.
//
// A Net is built by a Build function from weights (placed in the buffer type the test chooses, usage WEIGHTS) and
// INPUT tensors (left for the scheduler to place). The reference builds the same graph with every weight in CPU host
// memory and computes it on the CPU backend alone; since the scheduler's backends run the same reference kernels, the
// results are bit-identical.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <map>
#include <set>
#include <random>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"

namespace tessera::testnet {

struct Net {
  Context wctx{{.no_alloc = true}};
  Context ctx{{.no_alloc = true}};
  Graph graph;
  std::vector<std::pair<Tensor*, BufferType*>> weights;  // in creation order
  std::vector<std::unique_ptr<Buffer>> wbufs;
  std::vector<Tensor*> inputs;   // INPUT tensors, in creation order
  std::vector<Tensor*> outputs;  // OUTPUT tensors, in creation order
  bool reference = false;        // every weight on the CPU

  // A weight [ne0, ne1] in buft (nullptr: CPU host memory).
  Tensor* weight(const std::string& name, int64_t ne0, int64_t ne1, BufferType* buft, Type type = Type::kF32) {
    Tensor* w = wctx.new_tensor_2d(type, ne0, ne1);
    set_name(*w, name);
    weights.emplace_back(w, reference || buft == nullptr ? cpu::buffer_type() : buft);
    return w;
  }
  Tensor* weight_1d(const std::string& name, int64_t ne0, BufferType* buft) {
    Tensor* w = wctx.new_tensor_1d(Type::kF32, ne0);
    set_name(*w, name);
    weights.emplace_back(w, reference || buft == nullptr ? cpu::buffer_type() : buft);
    return w;
  }
  Tensor* input(const std::string& name, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, Type type = Type::kF32) {
    Tensor* t = ctx.new_tensor_3d(type, ne0, ne1, ne2);
    set_name(*t, name);
    set_input(*t);
    inputs.push_back(t);
    return t;
  }
  Tensor* output(Tensor* t, const std::string& name) {
    set_name(*t, name);
    set_output(*t);
    outputs.push_back(t);
    return t;
  }
  static Tensor* named(Tensor* t, const std::string& name) {
    set_name(*t, name);
    return t;
  }

  // Builds the graph from roots (in order: build_forward of each), places and fills the weights.
  void finish(const std::vector<Tensor*>& roots, unsigned wseed = 1) {
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    ASSERT_TRUE(wctx.ok()) << wctx.status().message();
    for (Tensor* r : roots) ASSERT_TRUE(graph.build_forward(r).ok());
    std::map<BufferType*, std::vector<Tensor*>> by_buft;
    for (auto& [w, b] : weights) by_buft[b].push_back(w);
    for (auto& [buft, ws] : by_buft) {
      size_t total = 0;
      for (Tensor* w : ws) total += (buft->alloc_size(*w) + 63) / 64 * 64;
      auto b = buft->alloc_buffer(total);
      ASSERT_TRUE(b.ok()) << b.status().message();
      (*b)->set_usage(BufferUsage::kWeights);
      TensorAllocator ta(**b);
      for (Tensor* w : ws) ASSERT_TRUE(ta.alloc(*w).ok());
      wbufs.push_back(std::move(b).value());
    }
    for (size_t i = 0; i < weights.size(); ++i) {
      Tensor* w = weights[i].first;
      std::mt19937 rng(wseed * 7919u + static_cast<unsigned>(i));
      std::normal_distribution<float> dist(0.0f, 0.3f);
      std::vector<float> v(static_cast<size_t>(nelements(*w)));
      for (float& f : v) f = dist(rng);
      ASSERT_TRUE(tensor_from_f32(*w, v).ok());
    }
  }

  // Sets every INPUT tensor (which must be placed): i32 tensors get positions, others normal values.
  void set_inputs(unsigned seed) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor* t = inputs[i];
      ASSERT_NE(t->data, nullptr) << t->name << " is not placed";
      std::mt19937 rng(seed * 104729u + static_cast<unsigned>(i));
      if (t->type == Type::kI32) {
        std::vector<int32_t> p(static_cast<size_t>(nelements(*t)));
        for (auto& x : p) x = static_cast<int32_t>(rng() % 100);
        ASSERT_TRUE(tensor_set(*t, p.data(), 0, p.size() * 4).ok());
      } else {
        std::normal_distribution<float> dist;
        std::vector<float> v(static_cast<size_t>(nelements(*t)));
        for (float& f : v) f = dist(rng);
        ASSERT_TRUE(tensor_from_f32(*t, v).ok());
      }
    }
  }

  std::vector<std::vector<float>> read_outputs() const {
    std::vector<std::vector<float>> out;
    for (Tensor* t : outputs) {
      auto v = tensor_to_f32(*t);
      EXPECT_TRUE(v.ok()) << t->name << ": " << v.status().message();
      out.push_back(v.ok() ? *v : std::vector<float>{});
    }
    return out;
  }
};

// Builds a graph into a net (weights through net.weight, inputs through net.input); returns the roots in the order
// the graph is to be built.
using Build = std::function<std::vector<Tensor*>(Net&)>;

// The outputs of the graph computed on the CPU backend alone, every tensor in its own memory.
inline std::vector<std::vector<float>> cpu_reference(const Build& build, unsigned wseed, unsigned iseed) {
  Net net;
  net.reference = true;
  net.finish(build(net), wseed);
  auto buf = alloc_ctx_tensors(net.ctx, *cpu::buffer_type());
  EXPECT_TRUE(buf.ok());
  net.set_inputs(iseed);
  auto cpu = cpu::make_backend({.n_threads = 1});
  EXPECT_EQ(cpu->graph_compute(net.graph), ComputeStatus::kSuccess) << cpu->last_error();
  return net.read_outputs();
}

// ---- structural checks of a split graph ----------------------------------------------------------------------

// Snapshot of every node's sources, to check the user's graph is restored.
using SourceSnapshot = std::vector<std::array<Tensor*, kMaxSrc>>;
inline SourceSnapshot snapshot_sources(const Graph& g) {
  SourceSnapshot s;
  for (const Tensor* n : g.nodes()) {
    std::array<Tensor*, kMaxSrc> a{};
    for (int j = 0; j < kMaxSrc; ++j) a[static_cast<size_t>(j)] = n->src[j];
    s.push_back(a);
  }
  return s;
}

// Every node reads exactly the user's sources (no scheduler copy, nothing named '#').
inline void expect_sources_restored(const Graph& g, const SourceSnapshot& snap) {
  ASSERT_EQ(g.n_nodes(), snap.size());
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    for (int j = 0; j < kMaxSrc; ++j) {
      EXPECT_EQ(n->src[j], snap[i][static_cast<size_t>(j)]) << "node " << n->name << " src " << j;
      if (n->src[j] != nullptr) {
        EXPECT_EQ(std::string(n->src[j]->name).find('#'), std::string::npos) << n->name << " reads a copy";
      }
    }
  }
}

// Splits cover the graph in order: contiguous, every non-view node in exactly one split, on the split's backend.
inline void expect_splits_cover(const Scheduler& s, const Graph& g) {
  const auto splits = s.splits();
  ASSERT_EQ(static_cast<int>(splits.size()), s.n_splits());
  ASSERT_FALSE(splits.empty());
  size_t first_non_view = g.n_nodes();
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    if (!op_is_view(g.node(i)->op)) {
      first_non_view = i;
      break;
    }
  }
  EXPECT_LE(splits.front().i_start, first_non_view);
  EXPECT_EQ(splits.back().i_end, g.n_nodes());
  std::vector<int> covered(g.n_nodes(), 0);
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    EXPECT_LT(sp.i_start, sp.i_end) << "split " << k << " is empty";
    if (k > 0) {
      EXPECT_EQ(sp.i_start, splits[k - 1].i_end) << "splits " << k - 1 << " and " << k << " not contiguous";
    }
    ASSERT_GE(sp.backend, 0);
    ASSERT_LT(sp.backend, s.n_backends());
    for (size_t i = sp.i_start; i < sp.i_end && i < g.n_nodes(); ++i) {
      const Tensor* n = g.node(i);
      ++covered[i];
      if (op_is_view(n->op)) continue;
      const TensorExplain e = s.explain(n);
      EXPECT_EQ(e.backend, sp.backend) << n->name << " in split " << k;
      EXPECT_EQ(e.split, static_cast<int>(k)) << n->name;
      EXPECT_FALSE(e.is_copy);
    }
    // the first node of a split is not a view, and a split never starts on the previous split's backend unless
    // that split had inputs (the only reasons for a new split on the same backend need them)
    EXPECT_FALSE(op_is_view(g.node(sp.i_start)->op)) << "split " << k << " starts with a view";
    if (k > 0 && splits[k - 1].backend == sp.backend) {
      EXPECT_FALSE(splits[k - 1].inputs.empty()) << "split " << k << " continues a split without inputs";
    }
  }
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    if (!op_is_view(g.node(i)->op)) {
      EXPECT_EQ(covered[i], 1) << "node " << i << " " << g.node(i)->name;
    }
  }
}

// Every split input lives on another backend, in a buffer type the split's backend cannot use; no split exceeds
// max_inputs; no tensor is an input of two splits on the same backend (the copy is reused). The graph must be
// allocated (inputs placed).
inline void expect_inputs_foreign(const Scheduler& s, int max_inputs) {
  std::set<std::pair<const Tensor*, int>> seen;
  const auto splits = s.splits();
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    Backend* sb = s.backend(sp.backend);
    EXPECT_LE(static_cast<int>(sp.inputs.size()), max_inputs) << "split " << k;
    for (const Tensor* in : sp.inputs) {
      const TensorExplain e = s.explain(in);
      EXPECT_NE(e.backend, sp.backend) << "input " << in->name << " of split " << k << " is on the split's backend";
      EXPECT_FALSE(e.is_copy) << in->name;
      const Buffer* b = tensor_buffer(*in);
      ASSERT_NE(b, nullptr) << in->name << " is not placed";
      EXPECT_FALSE(sb->supports_buft(*b->type())) << "input " << in->name << " of split " << k << " is in "
                                                  << b->type()->name() << ", usable by " << sb->name();
      EXPECT_TRUE(seen.insert({in, sp.backend}).second)
          << in->name << " is an input of two splits on " << sb->name() << " (the copy must be reused)";
    }
  }
}

// While allocated: every non-view node of each split reads only memory its backend can use.
inline void expect_readable(const Scheduler& s, const Graph& g) {
  for (const auto& sp : s.splits()) {
    Backend* sb = s.backend(sp.backend);
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const Tensor* n = g.node(i);
      if (op_is_view(n->op)) continue;
      for (const Tensor* src : n->src) {
        if (src == nullptr) continue;
        const Buffer* b = tensor_buffer(*src);
        ASSERT_NE(b, nullptr) << src->name << " (source of " << n->name << ") is not placed";
        EXPECT_TRUE(sb->supports_buft(*b->type()))
            << n->name << " on " << sb->name() << " reads " << src->name << " in " << b->type()->name();
      }
    }
  }
}

}  // namespace tessera::testnet

namespace tessera::testnet {

// A decoder-like stack: per layer rms_norm -> q = W1 x -> rope -> softmax -> silu(W2 .) -> residual, then out = 2 h.
// Layer l's weights live in bufts[l % bufts.size()] (nullptr: CPU host memory). Inputs: x [32, 1, tokens], pos.
inline std::vector<Tensor*> layer_stack(Net& n, const std::vector<BufferType*>& bufts, int layers, int64_t tokens = 4) {
  const int64_t d = 32;
  Context& c = n.ctx;
  Tensor* x = n.input("x", d, 1, tokens);
  Tensor* pos = n.input("pos", tokens, 1, 1, Type::kI32);
  Tensor* h = x;
  for (int l = 0; l < layers; ++l) {
    BufferType* b = bufts[static_cast<size_t>(l) % bufts.size()];
    Tensor* w1 = n.weight("blk." + std::to_string(l) + ".w1", d, d, b, Type::kF16);
    Tensor* w2 = n.weight("blk." + std::to_string(l) + ".w2", d, d, b, Type::kQ8_0);
    Tensor* nr = Net::named(rms_norm(c, h, 1e-5f), "norm." + std::to_string(l));
    Tensor* q = Net::named(mul_mat(c, w1, reshape_2d(c, nr, d, tokens)), "q." + std::to_string(l));
    Tensor* r =
        Net::named(rope(c, reshape_3d(c, q, d, 1, tokens), pos, static_cast<int>(d)), "rope." + std::to_string(l));
    Tensor* p = Net::named(soft_max(c, reshape_2d(c, r, d, tokens), nullptr, 0.5f), "sm." + std::to_string(l));
    Tensor* f = Net::named(silu(c, mul_mat(c, w2, p)), "ffn." + std::to_string(l));
    h = Net::named(add(c, h, reshape_3d(c, f, d, 1, tokens)), "res." + std::to_string(l));
  }
  return {n.output(scale(c, h, 2.0f), "out")};
}

}  // namespace tessera::testnet

namespace tessera::testnet {

inline SchedulerParams sched_params(bool parallel, int max_split_inputs = 30, bool op_offload = true) {
  SchedulerParams p;
  p.parallel = parallel;
  p.max_split_inputs = max_split_inputs;
  p.op_offload = op_offload;
  return p;
}

// The graph node of that name (a test failure when there is none).
inline Tensor* find_node(const Graph& g, const std::string& name) {
  for (Tensor* t : g.nodes()) {
    if (name == t->name) return t;
  }
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

// x -> c = softmax(x) [CPU] -> g1 = W c [GPU] -> s = softmax(g1) [CPU] -> g2 = s * c [GPU] -> out
inline Build reuse_graph(BufferType* g) {
  return [g](Net& n) -> std::vector<Tensor*> {
    Context& ctx = n.ctx;
    Tensor* x = n.input("x", 16, 4);
    Tensor* c = Net::named(soft_max(ctx, x), "c");
    Tensor* g1 = Net::named(mul_mat(ctx, n.weight("wg", 16, 16, g), c), "g1");
    Tensor* s = Net::named(soft_max(ctx, g1), "s");
    Tensor* g2 = Net::named(mul(ctx, s, c), "g2");
    return {n.output(scale(ctx, g2, 1.5f), "out")};
  };
}

}  // namespace tessera::testnet
