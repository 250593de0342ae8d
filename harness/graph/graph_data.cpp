// Deterministic data for the leafs of an arbitrary graph (see tessera/harness/graph/graph_data.h).
#include "tessera/harness/graph/graph_data.h"

#include <algorithm>
#include <random>
#include <unordered_map>

#include "tessera/graph_copy.h"

namespace tessera::harness {

namespace {

// Rank of a rule: a higher rank wins when a leaf is used in several ways.
int rank(LeafFill k) {
  switch (k) {
    case LeafFill::kFloat: return 0;
    case LeafFill::kPositive: return 1;
    case LeafFill::kPositions: return 2;
    case LeafFill::kIds: return 3;
    case LeafFill::kDistinctIds: return 4;
  }
  return 0;
}

}  // namespace

std::vector<LeafData> infer_leaf_data(const Graph& graph, const std::vector<Tensor*>& leafs) {
  std::vector<LeafData> out;
  std::unordered_map<const Tensor*, size_t> index;
  for (Tensor* t : leafs) {
    index.emplace(t, out.size());
    out.push_back({t, LeafFill::kFloat, 1});
  }
  auto use = [&](const Tensor* src, LeafFill kind, int64_t bound) {
    while (src != nullptr && src->view_src != nullptr) src = src->view_src;
    auto it = index.find(src);
    if (it == index.end()) return;
    LeafData& d = out[it->second];
    bound = std::max<int64_t>(bound, 1);
    if (rank(kind) > rank(d.kind)) {
      d.kind = kind;
      d.bound = bound;
    } else if (kind == d.kind) {
      d.bound = std::min(d.bound, bound);
    }
  };
  for (const Tensor* n : graph.nodes()) {
    switch (n->op) {
      case Op::kGetRows:
        if (n->src[0] != nullptr) use(n->src[1], LeafFill::kIds, n->src[0]->ne[1]);
        break;
      case Op::kSetRows:
        if (n->src[0] != nullptr) use(n->src[2], LeafFill::kDistinctIds, n->src[0]->ne[1]);
        break;
      case Op::kMulMatId:
        if (n->src[0] != nullptr) use(n->src[2], LeafFill::kDistinctIds, n->src[0]->ne[2]);
        break;
      case Op::kAddId:  // ids into the rows (experts) of the biases
        if (n->src[1] != nullptr) use(n->src[2], LeafFill::kIds, n->src[1]->ne[1]);
        break;
      case Op::kRope:
        use(n->src[1], LeafFill::kPositions, 1);
        use(n->src[2], LeafFill::kPositive, 1);
        break;
      default: break;
    }
  }
  return out;
}

Status fill_leaf(const LeafData& leaf, uint64_t seed, uint64_t key) {
  Tensor& t = *leaf.tensor;
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(key),
                    static_cast<uint32_t>(key >> 32), 0x7e55e4au};
  std::mt19937_64 rng(seq);
  const auto n = static_cast<size_t>(std::max<int64_t>(nelements(t), 0));
  std::vector<float> v(n);
  const auto bound = static_cast<uint64_t>(std::max<int64_t>(leaf.bound, 1));
  switch (leaf.kind) {
    case LeafFill::kFloat: {
      std::uniform_real_distribution<float> mag(0.25f, 1.0f);
      for (float& x : v) x = (rng() & 1) != 0 ? mag(rng) : -mag(rng);
      break;
    }
    case LeafFill::kPositive: {
      std::uniform_real_distribution<float> d(0.5f, 2.0f);
      for (float& x : v) x = d(rng);
      break;
    }
    case LeafFill::kIds:
      for (float& x : v) x = static_cast<float>(rng() % bound);
      break;
    case LeafFill::kDistinctIds: {
      // Distinct within each row of ne0 ids when the row fits in [0, bound); a longer row repeats values.
      const auto ne0 = static_cast<size_t>(std::max<int64_t>(t.ne[0], 1));
      std::vector<uint32_t> row_ids;
      for (size_t row = 0; row * ne0 < n; ++row) {
        row_ids.clear();
        for (size_t i = 0; i < ne0 && row * ne0 + i < n; ++i) {
          uint32_t id = static_cast<uint32_t>(rng() % bound);
          if (row_ids.size() < bound) {
            while (std::find(row_ids.begin(), row_ids.end(), id) != row_ids.end())
              id = static_cast<uint32_t>(rng() % bound);
          }
          row_ids.push_back(id);
          v[row * ne0 + i] = static_cast<float>(id);
        }
      }
      break;
    }
    case LeafFill::kPositions: {
      const auto start = static_cast<float>(rng() % 8);
      for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
      break;
    }
  }
  return tensor_from_f32(t, v);
}

}  // namespace tessera::harness
