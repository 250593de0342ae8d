// Running the splits: input copies with events, ordering across backends, the evaluation callback
// (docs/scheduler.md, the paragraph on execution).
#include "scheduler_impl.h"

namespace tessera {

namespace {

// The buffer holding t's bytes (tensor_buffer) and their address range; false when t has none.
bool byte_range(const Tensor& t, const Buffer** buffer, uintptr_t* begin, uintptr_t* end) {
  *buffer = tensor_buffer(t);
  if (*buffer == nullptr || t.data == nullptr) return false;
  *begin = reinterpret_cast<uintptr_t>(t.data);
  *end = *begin + nbytes(t);
  return true;
}

// Whether node w writes into the memory of another tensor, plan.root(w): a CPY or SET_ROWS, whose result is a view of
// its destination (a view op's result only aliases it).
bool writes_into_root(const sched::SchedPlan& plan, int32_t w) {
  return plan.view_src(w) >= 0 && !plan.has(w, sched::SchedPlan::kViewOp) && !plan.has(w, sched::SchedPlan::kNoneOp);
}

// Whether a node before `end` (graph order) writes into the memory of `id` through a view of it (a CPY or SET_ROWS
// whose destination is id or a view of it), which pass 4 places with id.
bool written_before(const sched::SchedPlan& plan, int32_t id, size_t end) {
  for (size_t n = 0; n < end && n < plan.n_nodes(); ++n) {
    const auto w = static_cast<int32_t>(n);
    if (writes_into_root(plan, w) && plan.root(w) == id) return true;
  }
  return false;
}

// Whether a node of split sp (of graph g) has a source for which pred(source) holds.
template <typename Pred>
bool some_source(const Graph& g, const sched::Split& sp, Pred pred) {
  for (size_t i = sp.i_start; i < sp.i_end && i < g.n_nodes(); ++i) {
    for (const Tensor* src : g.node(i)->src) {
      if (src != nullptr && pred(*src)) return true;
    }
  }
  return false;
}

// Computes nodes [i0, i1) of the user's graph on backend b.
ComputeStatus compute_range(Backend& b, const Graph& g, size_t i0, size_t i1, std::string* err) {
  Graph part = g.view(i0, i1);
  const ComputeStatus s = b.graph_compute_async(part);
  if (s != ComputeStatus::kSuccess) *err = b.last_error();
  return s;
}

}  // namespace

// Runs the splits of the current plan for the evaluation in slot `slot`: the graph inputs' per-slot copies first,
// then per split, in order, its four steps.
ComputeStatus Scheduler::Impl::execute() {
  last_error.clear();
  const int cur = slot;
  note_leaf_writers();
  if (const ComputeStatus s = copy_graph_inputs(cur); s != ComputeStatus::kSuccess) return s;

  // 0. before a backend's first split of this evaluation writes anything, the backends that may still read, from an
  // earlier evaluation, bytes it is about to write are done (docs/scheduler.md, "Who must be done before a write"):
  // nothing else orders another stream's read of an earlier evaluation before this evaluation's writes.
  // - every backend that read a tensor in place (without a copy): any backend may write the bytes read -- the owner's
  //   compute, a CPY or SET_ROWS of another backend into them, a tensor the planner put in the same bytes -- so every
  //   in-place reader counts for every backend;
  // - for a backend w that writes into another device's buffer (a host-visible GPU's CPY into a CPU-resident cache),
  //   every backend whose compute reads that buffer, its owner included: the owner's stream order covers its own
  //   writes, not w's;
  // - every backend that copies out of a buffer w writes, when the copy's source backend is not w: the copy's contract
  //   orders it before later work of its source backend only (issue 51,
  //   tests/scenarios/third-backend-writes-while-a-copy-reads.json).
  const std::vector<std::vector<int>> first_waits = first_split_waits_of(plan);
  std::vector<char> started(backends.size(), 0);
  int prev_backend = -1;
  for (size_t si = 0; si < plan.splits.size(); ++si) {
    const sched::Split& sp = plan.splits[si];
    Backend& sb = *backends[static_cast<size_t>(sp.backend)];
    Event* slot_event = event(sp.backend, cur);
    if (started[static_cast<size_t>(sp.backend)] == 0) {
      started[static_cast<size_t>(sp.backend)] = 1;
      for (int r : first_waits[static_cast<size_t>(sp.backend)]) {
        if (Status s = stream_wait(r, sb); !s.ok()) {
          return fail(ComputeStatus::kFailed,
                      format_message("scheduler: before split %zu: %s", si, s.message().c_str()));
        }
      }
    }

    // 1. a split after a split on another backend waits for it, before anything else: the planner may have reused
    // memory the earlier backend still reads (also for this split's input copies), and this split may read, without
    // a copy, what the earlier split wrote into memory both can use (a host-visible buffer). Every split waiting for
    // the one before chains all splits in order.
    const bool after_other = prev_backend >= 0 && prev_backend != sp.backend;
    Event* prev_event = after_other ? event(prev_backend, cur) : nullptr;
    if (after_other) {
      if (prev_event != nullptr) {
        prev_event->wait(sb);
      } else if (Status s = backends[static_cast<size_t>(prev_backend)]->synchronize(); !s.ok()) {
        return fail(ComputeStatus::kFailed, format_message("scheduler: before split %zu: %s", si, s.message().c_str()));
      }
    }
    // 2. inputs
    for (size_t k = 0; k < sp.inputs.size(); ++k) {
      if (Status s = copy_split_input(sp, k, cur, sb, prev_event, slot_event); !s.ok()) {
        return fail(ComputeStatus::kFailed,
                    format_message("scheduler: split %zu, copying input %s to %s: %s", si,
                                   describe(*sp.inputs[k]).c_str(), sb.name(), s.message().c_str()));
      }
    }
    // 3. compute
    if (const ComputeStatus s = compute_split(si, sp, sb); s != ComputeStatus::kSuccess) return s;
    // 4. mark the end of this split for this slot
    if (slot_event != nullptr) slot_event->record(sb);
    prev_backend = sp.backend;
  }
  return ComputeStatus::kSuccess;
}

// Pipelined user inputs: copy the user's values into this evaluation's slot (slot 0 has none to make: it reads the
// input itself), once no earlier evaluation that used the slot can still read it: the input's own backend, and every
// other backend that reads the slot's copy where it is, without a copy of its own (a host-visible GPU reading a CPU
// input: found by the reuse sweep on a unified-memory preset, where gpu0 still read slot 0's tokens while the host
// wrote the next evaluation's).
ComputeStatus Scheduler::Impl::copy_graph_inputs(int cur) {
  std::vector<char> waited(backends.size(), 0);
  for (size_t k = 0; k < plan.graph_inputs.size(); ++k) {
    Tensor* in = plan.graph_inputs[k];
    const int32_t id = plan.graph_input_ids[k];
    const int b = plan.backend(id);
    Tensor* cpy = plan.copy_in_set(plan.copy_set(id, b), cur);
    if (cpy == in) continue;  // slot 0 reads the input itself (alloc_graph waited for its earlier readers)
    Status s;
    if (waited[static_cast<size_t>(b)] == 0) {
      waited[static_cast<size_t>(b)] = 1;
      if (Event* ev = event(b, cur)) {
        ev->synchronize();
      } else {
        s = backends[static_cast<size_t>(b)]->synchronize();
      }
    }
    if (s.ok()) s = wait_for_other_readers(*cpy, b, cur, &waited);
    if (s.ok()) s = tensor_copy(*in, *cpy);
    if (!s.ok()) return fail(ComputeStatus::kFailed, "scheduler: " + s.message());
  }
  return ComputeStatus::kSuccess;
}

void Scheduler::Impl::note_leaf_writers() {
  leaf_writers.clear();
  for (size_t n = 0; n < plan.n_nodes(); ++n) {
    const auto w = static_cast<int32_t>(n);
    if (!writes_into_root(plan, w)) continue;
    const int32_t root = plan.root(w);
    const Tensor* t = plan.tensor(root);
    if (t == nullptr || t->op != Op::kNone) continue;
    std::vector<int>& v = leaf_writers[root];
    const int b = plan.backend(w);
    if (b >= 0 && std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  }
}

const std::vector<int>* Scheduler::Impl::leaf_writers_of(int32_t id) const {
  if (leaf_writers.empty()) return nullptr;
  auto it = leaf_writers.find(plan.root(id));
  return it == leaf_writers.end() ? nullptr : &it->second;
}

Status Scheduler::Impl::wait_for_leaf_writers(int32_t id, std::vector<char>* waited) {
  const std::vector<int>* writers = leaf_writers_of(id);
  if (writers == nullptr) return Status();
  for (int b : *writers) {
    char& w = (*waited)[static_cast<size_t>(b)];
    if (w == 2) continue;
    w = 2;
    TS_RETURN_IF_ERROR(host_wait(b));
  }
  return Status();
}

Status Scheduler::Impl::wait_for_leaf_writers_on_stream(int32_t id, int src, int sb) {
  const std::vector<int>* writers = leaf_writers_of(id);
  if (writers == nullptr) return Status();
  for (int b : *writers) {
    if (b == src || b == sb) continue;  // (the copy's contract, and sb's own stream order)
    TS_RETURN_IF_ERROR(stream_wait(b, *backends[static_cast<size_t>(sb)]));
  }
  return Status();
}

// The other readers of a copy's bytes, which the host is about to overwrite for this evaluation:
// - every backend that reads the copy's buffer where it is, without a copy of its own (a host-visible GPU reading a
//   CPU input: found by the reuse sweep on a unified-memory preset, where gpu0 still read slot 0's tokens while the
//   host wrote the next evaluation's); its event of this slot;
// - every backend whose stream copies out of the same bytes: the planner may give the copy bytes that another tensor
//   held in the evaluation before (the copy's lifetime ends early), and a split on another backend copied that tensor
//   out with cpy_tensor_async -- on its own stream, after the owner's event of that evaluation was recorded, so the
//   owner's event does not cover it (issue 51: `run -t 8x80gb -m tiny --layers 6 --evaluations 2`, gpu5 still
//   copying norm-5 out of gpu4's buffer while the host wrote the next inp_pos there). Its events of every slot: the
//   bytes may have been read in any earlier evaluation still in flight.
// A backend without events is synchronized.
Status Scheduler::Impl::wait_for_other_readers(const Tensor& cpy, int owner, int cur, std::vector<char>* waited) {
  auto wait = [&](int r, bool all_slots) -> Status {
    char& w = (*waited)[static_cast<size_t>(r)];
    if (w == (all_slots ? 2 : 1) || w == 2) return Status();
    w = all_slots ? 2 : 1;
    return host_wait(r, all_slots ? -1 : cur);
  };
  for (size_t r = 0; r < backends.size(); ++r) {
    if (static_cast<int>(r) == owner || cpy.buffer == nullptr) continue;
    if (backends[r]->supports_buft(*cpy.buffer->type())) TS_RETURN_IF_ERROR(wait(static_cast<int>(r), false));
  }
  const Buffer* buf = nullptr;
  uintptr_t b0 = 0, b1 = 0;
  const bool known = byte_range(cpy, &buf, &b0, &b1);
  for (const sched::Split& sp : plan.splits) {
    if (sp.backend == owner || (*waited)[static_cast<size_t>(sp.backend)] == 2) continue;
    for (const Tensor* src : sp.inputs) {
      const Buffer* sbuf = nullptr;
      uintptr_t s0 = 0, s1 = 0;
      // (bytes unknown: counted as overlapping when in the same buffer)
      const bool has = byte_range(*src, &sbuf, &s0, &s1);
      if (sbuf == nullptr || sbuf != buf) continue;
      if (known && has && (s1 <= b0 || b1 <= s0)) continue;
      TS_RETURN_IF_ERROR(wait(sp.backend, true));
      break;
    }
  }
  return Status();
}

// A user INPUT's bytes read by another backend's stream after graph_compute_async returns: where they live (its
// backend takes the input's buffer type, so pass 5 made no copy), or by cpy_tensor_async of a tensor that is a view of
// the input (a SET_ROWS or CPY that wrote into it: not the input itself, which the host copies at once). The user
// writes the next evaluation's inputs after alloc_graph, so alloc_graph first waits for every such backend (all its
// slot events; without events, a synchronize). Found by the scheduler properties once they ran several evaluations
// (issue 51): a host-visible gpu0 still read the input v0.x while the next evaluation's value was written into it,
// and gpu0 still copied v3.set_rows, a view of v0.x, out of the CPU's buffer. The input's own backend counts too when
// its nodes read the user's tensor itself: serial, or pipelined in slot 0, whose copy of a graph input is the input
// (as in llama.cpp; the sources are the last evaluation's). A synchronous CPU is done when the call returns; an
// asynchronous one was not waited for until the generated cases drew one (an asynchronous CPU, session 60: the host
// wrote v0.x for the next evaluation while the CPU's stream still read it).
// The readers of evaluations computed since the last alloc_graph count too: graph_compute_async allocates a graph
// computed already again by itself (the same inputs), so an evaluation in slot 0 may be followed by one in slot 1
// before the user writes anything (note_inplace_input_readers keeps its readers; found by the end-to-end fuzzer:
// slot 0 read v0.x on an asynchronous CPU, a computation again took slot 1, and the next alloc_graph, seeing slot 1's
// copies, let the host write v0.x at once).
Status Scheduler::Impl::wait_for_inplace_input_readers() {
  note_inplace_input_readers();
  std::vector<char> wait;
  wait.swap(pending_input_readers);
  for (size_t r = 0; r < wait.size(); ++r) {
    if (wait[r] != 0) TS_RETURN_IF_ERROR(host_wait(static_cast<int>(r)));
  }
  return Status();
}

void Scheduler::Impl::note_inplace_input_readers() {
  if (!computed || graph == nullptr) return;
  std::vector<char>& pending = pending_input_readers;
  pending.resize(backends.size(), 0);
  for (const sched::Split& sp : plan.splits) {
    if (pending[static_cast<size_t>(sp.backend)] != 0) continue;
    auto is_user_input = [](const Tensor& t) { return t.op == Op::kNone && (t.flags & kFlagInput) != 0; };
    bool reads = false;
    for (size_t k = 0; k < sp.inputs.size(); ++k) {
      const Tensor* in = sp.inputs[k];
      if (in->view_src != nullptr && is_user_input(*in->view_src)) reads = true;  // a view of an input, copied out
      // an input an earlier split wrote into, copied out on sp's stream (copy_split_input's ordered path)
      if (is_user_input(*in) && written_before(plan, sp.input_ids[k], sp.i_start)) reads = true;
    }
    reads = reads || some_source(*graph, sp, [&](const Tensor& src) {  // an input read where it lives
              const Tensor& root = src.view_src != nullptr ? *src.view_src : src;
              if (!is_user_input(root)) return false;
              const int owner = plan.backend_of(&root);
              if (owner < 0) return false;
              // another backend reading it where it lives, or its own backend reading the user's tensor itself (not
              // a slot's copy: serial, or pipelined in slot 0, whose copy is the input)
              return owner != sp.backend || !plan.is_copy(&root);
            });
    if (reads) pending[static_cast<size_t>(sp.backend)] = 1;
  }
}

Status Scheduler::Impl::host_wait(int r, int only) {
  if (event(r, 0) == nullptr) return backends[static_cast<size_t>(r)]->synchronize();
  for (int s = 0; s < n_copies; ++s) {
    if (only < 0 || s == only) event(r, s)->synchronize();
  }
  return Status();
}

Status Scheduler::Impl::stream_wait(int r, Backend& sb) {
  if (event(r, 0) == nullptr) return host_wait(r);
  for (int s = 0; s < n_copies; ++s) event(r, s)->wait(sb);
  return Status();
}

std::vector<std::vector<int>> Scheduler::Impl::first_split_waits_of(const sched::SchedPlan& p) const {
  const size_t nb = backends.size();
  std::vector<std::vector<int>> out(nb);
  if (graph == nullptr) return out;
  auto add = [&](size_t w, size_t r) {
    if (r != w && std::find(out[w].begin(), out[w].end(), static_cast<int>(r)) == out[w].end()) {
      out[w].push_back(static_cast<int>(r));
    }
  };
  auto insert = [](std::vector<const Buffer*>& v, const Buffer* b) {
    if (b != nullptr && std::find(v.begin(), v.end(), b) == v.end()) v.push_back(b);
  };
  auto has = [](const std::vector<const Buffer*>& v, const Buffer* b) {
    return std::find(v.begin(), v.end(), b) != v.end();
  };
  // per backend: the buffers its nodes write (a node's own bytes: itself or what it is a view of), the buffers its
  // nodes read where they are, and whether one of those is another device's
  std::vector<std::vector<const Buffer*>> writes(nb), reads(nb);
  std::vector<char> inplace(nb, 0);
  for (const sched::Split& sp : p.splits) {
    const size_t b = static_cast<size_t>(sp.backend);
    const Device* mine = backends[b]->device();
    for (size_t i = sp.i_start; i < sp.i_end && i < graph->n_nodes(); ++i) {
      const Tensor* node = graph->node(i);
      insert(writes[b], tensor_buffer(*node));
      for (const Tensor* src : node->src) {
        const Buffer* buf = src != nullptr ? tensor_buffer(*src) : nullptr;
        if (buf == nullptr) continue;
        insert(reads[b], buf);
        if (buf->type()->device() != mine) inplace[b] = 1;
      }
    }
  }
  for (size_t w = 0; w < nb; ++w) {
    for (size_t r = 0; r < nb; ++r) {
      // a backend reading another device's memory in place: any backend may write those bytes
      if (inplace[r] != 0) add(w, r);
      // w writes into another device's buffer that r's compute reads (r may be that buffer's owner: its stream order
      // covers its own writes, not w's)
      for (const Buffer* buf : writes[w]) {
        if (buf->type()->device() != backends[w]->device() && has(reads[r], buf)) add(w, r);
      }
    }
    // (writes before reads: below)
    // r copies out of a buffer w writes, and the copy's source backend is not w: the copy's contract orders it before
    // later work of its source backend only
    for (const sched::Split& sp : p.splits) {
      for (size_t k = 0; k < sp.inputs.size(); ++k) {
        if (p.backend(sp.input_ids[k]) != static_cast<int>(w) && has(writes[w], tensor_buffer(*sp.inputs[k]))) {
          add(w, static_cast<size_t>(sp.backend));
          break;
        }
      }
    }
  }
  // Writes before reads: a split of w reads a tensor where it lives (not a copy) that a later split of r writes into
  // (a SET_ROWS or CPY into it). In one evaluation the read comes first; the next evaluation's read must come after
  // this one's write, and nothing else orders r's stream before w's first split (found by the end-to-end fuzzer: an
  // asynchronous CPU's SET_ROWS into a cache that a host-visible accelerator read in place at the start of the next
  // evaluation).
  std::unordered_map<const Tensor*, std::vector<std::pair<size_t, size_t>>> readers;  // root -> (split, backend)
  for (size_t si = 0; si < p.splits.size(); ++si) {
    const sched::Split& sp = p.splits[si];
    for (size_t i = sp.i_start; i < sp.i_end && i < graph->n_nodes(); ++i) {
      const Tensor* node = graph->node(i);
      if (node->view_src != nullptr && !op_is_view(node->op)) {  // a writer: its root's earlier readers wait for it
        auto it = readers.find(node->view_src);
        if (it != readers.end()) {
          for (const auto& [r_split, r_backend] : it->second) {
            if (r_split < si) add(r_backend, static_cast<size_t>(sp.backend));
          }
        }
      }
      for (const Tensor* src : node->src) {
        if (src == nullptr) continue;
        const Tensor* root = src->view_src != nullptr ? src->view_src : src;
        // (only a leaf can be read before it is written: a node's output is computed before anything reads it)
        if (root->op == Op::kNone) readers[root].emplace_back(si, static_cast<size_t>(sp.backend));
      }
    }
  }
  return out;
}

// Input k of split sp into its copy for slot cur on the split's backend sb, after what the copy must wait for:
// prev_event, the previous split's (on another backend; null when none or when that backend has no events), and
// slot_event, the last split of an earlier evaluation in this slot on sb (null when sb has no events: sb is
// synchronized instead).
Status Scheduler::Impl::copy_split_input(const sched::Split& sp, size_t k, int cur, Backend& sb, Event* prev_event,
                                         Event* slot_event) {
  Tensor* in = sp.inputs[k];
  Tensor* cpy = sp.input_copies[k][static_cast<size_t>(cur)];
  const int ib = plan.backend(sp.input_ids[k]);
  Backend& src_backend = *backends[static_cast<size_t>(ib)];
  Status s;
  if (in->op == Op::kNone && (in->flags & kFlagInput) != 0 && !written_before(plan, sp.input_ids[k], sp.i_start)) {
    // The user may overwrite an input as soon as the call returns: copy it now, after this slot is free. (A
    // computed tensor flagged input is produced by an earlier split, and an input an earlier split wrote into (a CPY
    // into it, on its backend's stream, which may not have run yet: found by the end-to-end fuzzer with an
    // asynchronous CPU) holds what that split wrote: both take the ordered path below.) The host
    // writes the copy, so the work of sb that may still touch its bytes must be complete (the slot's event: it was
    // recorded after sb's last split, of this evaluation or of the earlier one in this slot), and so must every
    // other stream that may still read them (wait_for_other_readers: in-place readers, the previous split's backend
    // among them, and copies out), and, for an input the graph writes into later, the backends writing it (an
    // earlier evaluation's write may still be in flight: wait_for_leaf_writers). The previous split itself need not be
    // done: it writes only its own backend's memory, and ggml does not wait for it either -- that wait put the host in
    // step with every split and undid the overlap of evaluations in flight (issue 46).
    if (slot_event != nullptr) {
      slot_event->synchronize();
    } else {
      s = sb.synchronize();
    }
    if (s.ok()) {
      std::vector<char> waited(backends.size(), 0);
      s = wait_for_other_readers(*cpy, sp.backend, cur, &waited);
      if (s.ok()) s = wait_for_leaf_writers(sp.input_ids[k], &waited);
    }
    if (s.ok()) s = tensor_copy(*in, *cpy);
  } else {
    if (slot_event != nullptr) {
      slot_event->wait(sb);
    } else {
      s = sb.synchronize();
    }
    // (a leaf the graph writes into: the writers other than the copy's source backend, whose write of an earlier
    // evaluation the copy's contract does not order)
    if (s.ok()) s = wait_for_leaf_writers_on_stream(sp.input_ids[k], ib, sp.backend);
    if (s.ok() && !sb.cpy_tensor_async(&src_backend, *in, *cpy)) {
      // no native async copy: the host copies, so the producer must be done, and so must the previous user of
      // this slot, the previous split (whose memory the copy may reuse) and every other stream that may still read
      // the copy's bytes (wait_for_other_readers: a third backend's cpy_tensor_async out of bytes the planner gave
      // this copy, found by the scheduler properties at 2,000 cases of seed 9,
      // tests/scenarios/host-copy-fallback-while-a-third-backend-copies-out.json)
      s = src_backend.synchronize();
      if (prev_event != nullptr) prev_event->synchronize();
      if (slot_event != nullptr) {
        slot_event->synchronize();
      } else if (s.ok()) {
        s = sb.synchronize();
      }
      if (s.ok()) {
        std::vector<char> waited(backends.size(), 0);
        s = wait_for_other_readers(*cpy, sp.backend, cur, &waited);
        // (and the backends writing into the leaf the input is, or is a view of: an earlier evaluation's write)
        if (s.ok()) s = wait_for_leaf_writers(sp.input_ids[k], &waited);
      }
      if (s.ok()) s = tensor_copy(*in, *cpy);
    }
  }
  return s;
}

// Computes split si's nodes on sb: in one call, or with an evaluation callback in chunks up to each node it observes
// (synchronized before the callback sees it; the callback returning false stops the evaluation).
ComputeStatus Scheduler::Impl::compute_split(size_t si, const sched::Split& sp, Backend& sb) {
  const Graph& g = *graph;
  std::string err;
  if (!callback) {
    const ComputeStatus s = compute_range(sb, g, sp.i_start, sp.i_end, &err);
    if (s != ComputeStatus::kSuccess) {
      return fail(s, format_message("scheduler: split %zu on %s: %s", si, sb.name(), err.c_str()));
    }
    return ComputeStatus::kSuccess;
  }
  size_t j0 = sp.i_start;
  for (size_t j = sp.i_start; j < sp.i_end; ++j) {
    Tensor* t = g.node(j);
    const bool want = callback(t, true);
    if (!want && j + 1 < sp.i_end) continue;
    const ComputeStatus s = compute_range(sb, g, j0, j + 1, &err);
    if (s != ComputeStatus::kSuccess) {
      return fail(s, format_message("scheduler: split %zu on %s: %s", si, sb.name(), err.c_str()));
    }
    j0 = j + 1;
    if (want) {
      if (Status sync = sb.synchronize(); !sync.ok()) {
        return fail(ComputeStatus::kFailed,
                    format_message("scheduler: split %zu on %s: %s", si, sb.name(), sync.message().c_str()));
      }
      if (!callback(t, false)) {
        return fail(ComputeStatus::kAborted,
                    format_message("scheduler: the evaluation callback stopped at %s", describe(*t).c_str()));
      }
    }
  }
  return ComputeStatus::kSuccess;
}

}  // namespace tessera
