// The session's descriptions of its workload and splits (tessera/harness/session/session.h): the headline's workload,
// the weight types, and the split records behind the text split table and the JSON split list.
#include <algorithm>
#include <map>

#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"

namespace tessera::harness {

using namespace tessera::sim;

std::vector<WeightTypeTotal> Session::weight_types() const {
  return weight_type_totals(config_.graph ? loaded_.weights : model_.weights);
}

std::vector<WeightTypeTotal> weight_type_totals(const std::vector<Tensor*>& weights) {
  std::map<Type, WeightTypeTotal> by_type;
  for (const Tensor* w : weights) {
    WeightTypeTotal& t = by_type[w->type];
    t.type = w->type;
    t.tensors += 1;
    t.bytes += nbytes(*w);
  }
  std::vector<WeightTypeTotal> out;
  for (const auto& [type, total] : by_type) out.push_back(total);
  std::stable_sort(out.begin(), out.end(), [](const WeightTypeTotal& a, const WeightTypeTotal& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return std::string(type_name(a.type)) < type_name(b.type);
  });
  return out;
}

std::string Session::describe_workload() const {
  std::string types;
  for (const WeightTypeTotal& t : weight_types()) types += (types.empty() ? "" : "/") + std::string(type_name(t.type));
  if (types.empty()) types = "none";
  if (config_.graph) {
    return format_message("graph %s (%zu nodes, %zu leafs; weights %s)", config_.graph->source.c_str(),
                          graph_->n_nodes(), graph_->n_leafs(), types.c_str());
  }
  const models::LlamaConfig& c = config_.model;
  return format_message("model %s (%d layers, %lld tokens, %s attention; context %lld, weights %s, KV cache %s)",
                        c.name.c_str(), c.n_layer, static_cast<long long>(c.n_tokens),
                        c.flash_attn ? "flash" : "matmul/softmax", static_cast<long long>(c.n_ctx), types.c_str(),
                        c.kv_type_text().c_str());
}

std::vector<SplitRecord> Session::split_records() const {
  std::vector<SplitRecord> out;
  const auto splits = sched_->splits();
  const Graph& g = *current_;
  const std::vector<SplitCause> causes = split_causes(*sched_, g);
  for (size_t i = 0; i < splits.size(); ++i) {
    const auto& sp = splits[i];
    SplitRecord r;
    r.reason = split_cause_name(causes[i]);
    r.reason_text = split_cause_description(causes[i]);
    r.cut = split_reason_name(sp.reason);
    r.index = static_cast<int>(i);
    r.backend = sched_->backend(sp.backend)->name();
    r.first_node = sp.i_start;
    r.end_node = sp.i_end;
    for (const Tensor* in : sp.inputs) r.inputs.push_back({in->name, nbytes(*in), sched_->explain(in).backend_name});
    if (sp.i_end > sp.i_start) {
      r.first_tensor = g.node(sp.i_start)->name;
      r.last_tensor = g.node(sp.i_end - 1)->name;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string Session::splits_table() const {
  std::string s;
  for (const SplitRecord& r : split_records()) {
    s += format_message("split %d: %s, nodes %zu..%zu (%zu), %zu inputs, cause %s (cut: %s)\n", r.index,
                        r.backend.c_str(), r.first_node, r.end_node, r.end_node - r.first_node, r.inputs.size(),
                        r.reason.c_str(), r.cut.c_str());
    for (const SplitRecord::Input& in : r.inputs) {
      s += format_message("    input %s (%s) from %s\n", in.name.c_str(), format_bytes(in.bytes).c_str(),
                          in.from.c_str());
    }
    if (r.end_node > r.first_node) {
      s += format_message("    first %s, last %s\n", r.first_tensor.c_str(), r.last_tensor.c_str());
    }
  }
  return s;
}

}  // namespace tessera::harness
