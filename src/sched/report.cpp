// The textual report of splits, inputs and nodes with causes (docs/scheduler.md, 'Queries and the report').
#include <sstream>

#include "scheduler_impl.h"

namespace tessera {

namespace {
std::string size_str(size_t bytes) {
  char buf[32];
  if (bytes >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024);
  }
  return buf;
}
}  // namespace

std::string Scheduler::report() const {
  const Impl& m = *impl_;
  std::ostringstream out;
  if (m.graph == nullptr) return "scheduler: no graph split (call alloc_graph or reserve first)\n";
  const Graph& g = *m.graph;
  out << "splits: " << m.plan.splits.size() << ", backends: " << m.backends.size() << ", slots: " << m.n_copies
      << ", current slot: " << m.slot << "\n";
  if (m.full_plans + m.reuses > 0) {
    out << "plan: " << (m.last_reused ? "reused" : "new");
    if (!m.last_reused && !m.reuse_why.empty()) out << " (not reused: " << m.reuse_why << ")";
    out << ", " << m.reuses << " reused / " << m.full_plans << " planned\n";
  }
  for (size_t si = 0; si < m.plan.splits.size(); ++si) {
    const sched::Split& sp = m.plan.splits[si];
    out << "## split #" << si << ": " << m.backends[static_cast<size_t>(sp.backend)]->name() << " # "
        << sp.inputs.size() << " inputs (cut: " << split_reason_name(sp.reason) << ")";
    for (const Tensor* in : sp.inputs) out << ": [" << in->name << " (" << size_str(nbytes(*in)) << ")] ";
    out << "\n";
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const Tensor* n = g.node(i);
      const int b = m.plan.backend_of(n);
      out << "node #" << i << " (" << op_name(n->op) << "): " << n->name << " (" << size_str(nbytes(*n)) << ") ["
          << (b >= 0 ? m.backends[static_cast<size_t>(b)]->name() : "NULL") << " " << cause_name(m.plan.cause_of(n))
          << "]:";
      for (const Tensor* s : n->src) {
        if (s == nullptr) continue;
        const int sbk = m.plan.backend_of(s);
        out << " " << s->name << " [" << (sbk >= 0 ? m.backends[static_cast<size_t>(sbk)]->name() : "NULL") << " "
            << cause_name(m.plan.cause_of(s)) << "]";
      }
      out << "\n";
    }
  }
  return out.str();
}

}  // namespace tessera
