// Running a session: evaluations, the lifecycle steps of scenario files and the comparison with the CPU reference
// (see tessera/harness/session/session.h).
#include <algorithm>
#include <cstdint>

#include "session_detail.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/session/session.h"
#include "tessera/sim/trace.h"

namespace tessera::harness {

using namespace tessera::sim;

namespace {

Status compute_status(ComputeStatus cs, const std::string& error) {
  if (cs == ComputeStatus::kSuccess) return Status::Ok();
  return Status(cs == ComputeStatus::kAllocFailed ? StatusCode::kAllocFailed : StatusCode::kFailed, error);
}

}  // namespace

const char* Session::step_name(Step step) {
  switch (step) {
    case Step::kReserve: return "reserve";
    case Step::kAlloc: return "alloc";
    case Step::kCompute: return "compute";
    case Step::kReserveNext: return "reserve-next";
    case Step::kAllocNext: return "alloc-next";
    case Step::kComputeNext: return "compute-next";
    case Step::kSynchronize: return "synchronize";
    case Step::kReset: return "reset";
    case Step::kComputeAgain: return "compute-again";
    case Step::kComputeNextAgain: return "compute-next-again";
  }
  return "?";
}

Result<RunStats> Session::run(int evaluations, bool check_numerics) {
  current_ = graph_;  // run() evaluates the first graph only
  TS_RETURN_IF_ERROR(plan());
  TS_RETURN_IF_ERROR(set_inputs());
  step("computing");
  eval_first_event_ = sim_->trace().events.size();
  for (int i = 0; i < std::max(evaluations, 1); ++i) {
    if (i > 0) {
      // as an application does per batch: allocate, write this evaluation's inputs (the same ones with fixed inputs:
      // a graph may have written into an input, as the CPU reference's replay rewrites them too), compute
      TS_RETURN_IF_ERROR(sched_->alloc_graph(*graph_));
      TS_RETURN_IF_ERROR(set_inputs());
    }
    TS_RETURN_IF_ERROR(compute_status(sched_->graph_compute_async(*graph_), sched_->last_error()));
    computes_.push_back({false, true, inputs_seed_});
  }
  computed_last_ = 0;
  return finish_run(check_numerics);
}

Result<RunStats> Session::run_steps(const std::vector<Step>& steps, bool check_numerics) {
  std::vector<StepSpec> specs;
  for (Step s : steps) specs.push_back({s, false, {}});
  return run_steps(specs, check_numerics);
}

// The graph `which` computed again as it is: no alloc_graph, no inputs written.
Status Session::compute_again(int which) {
  const char* name = step_name(which == 1 ? Step::kComputeNextAgain : Step::kComputeAgain);
  if (which == 1 && !config_.next_graph) {
    return Status(StatusCode::kInvalidArgument, "the scenario has no next graph (\"next_graph\")");
  }
  if (config_.policy.free_inputs) {
    return Status(StatusCode::kInvalidArgument,
                  format_message("%s needs the graph's inputs kept, and policy free_inputs frees them after their "
                                 "last use",
                                 name));
  }
  if (computed_last_ != which) {
    return Status(StatusCode::kInvalidArgument,
                  format_message("%s evaluates the graph computed last once more: a %s must come before it, with "
                                 "no reserve, alloc, reset or step of the other graph between (a synchronize may)",
                                 name, which == 1 ? "compute-next" : "compute"));
  }
  current_ = which == 1 ? next_.graph.get() : graph_;
  return evaluate(which, /*inputs_written=*/false);
}

// One evaluation of graph `which` (current_), recorded for the CPU reference's replay.
Status Session::evaluate(int which, bool inputs_written) {
  eval_first_event_ = std::min(eval_first_event_, sim_->trace().events.size());
  computed_last_ = -1;
  TS_RETURN_IF_ERROR(compute_status(sched_->graph_compute_async(*current_), sched_->last_error()));
  computes_.push_back({which == 1, inputs_written, inputs_seed_});
  computed_last_ = which;
  return Status::Ok();
}

// One step; `fresh`: the graph (0: first, 1: next) allocated with its inputs written and not computed yet, or -1.
Status Session::run_one_step(const StepSpec& spec, int* fresh) {
  if (spec.step == Step::kSynchronize) {
    return sched_->synchronize();  // (the comparison is run_steps')
  }
  if (spec.step == Step::kReset) {
    sched_->reset();
    *fresh = -1;
    computed_last_ = -1;
    return apply_pins();  // reset drops the user's pins; an application sets them again
  }
  if (spec.step == Step::kComputeAgain || spec.step == Step::kComputeNextAgain) {
    *fresh = -1;
    return compute_again(spec.step == Step::kComputeNextAgain ? 1 : 0);
  }
  computed_last_ = -1;
  const int step = static_cast<int>(spec.step);
  const int which = step / 3;  // kReserve, kAlloc, kCompute, then the same three for the next graph
  const int kind = step % 3;
  if (which == 1 && !config_.next_graph) {
    return Status(StatusCode::kInvalidArgument, "the scenario has no next graph (\"next_graph\")");
  }
  Graph& g = which == 1 ? *next_.graph : *graph_;
  current_ = &g;
  if (kind == 0) {
    *fresh = -1;
    return sched_->reserve(g);
  }
  if (kind == 1 || *fresh != which) {
    *fresh = -1;
    TS_RETURN_IF_ERROR(sched_->alloc_graph(g));
    TS_RETURN_IF_ERROR(which == 1 ? set_next_inputs() : set_inputs());
    *fresh = which;
  }
  if (kind == 2) {
    *fresh = -1;
    TS_RETURN_IF_ERROR(evaluate(which, /*inputs_written=*/true));
  }
  return Status::Ok();
}

Result<RunStats> Session::run_steps(const std::vector<StepSpec>& steps, bool check_numerics) {
  if (steps.empty()) return Status(StatusCode::kInvalidArgument, "run_steps: no steps");
  eval_first_event_ = SIZE_MAX;
  int fresh = -1;
  RunStats r;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepSpec& spec = steps[i];
    Status s = run_one_step(spec, &fresh);
    if (!spec.must_fail && s.ok() && spec.step == Step::kSynchronize && check_numerics &&
        config_.sim.mode == MemoryMode::kBacked && !computes_.empty()) {
      s = compare_outputs(&r);
    }
    // (a step that failed as it must lets the next steps retry on the state the failure left)
    TS_RETURN_IF_ERROR(step_outcome(spec, i, s));
  }
  return finish_run(check_numerics, r);
}

Status Session::step_outcome(const StepSpec& spec, size_t index, const Status& s) {
  const char* name = step_name(spec.step);
  if (spec.must_fail) {
    if (s.ok()) {
      return Status(StatusCode::kFailed,
                    format_message("step %zu (%s): expected to fail, but it succeeded", index + 1, name));
    }
    if (s.message().find(spec.error_contains) == std::string::npos) {
      return Status(s.code(), format_message("step %zu (%s): expected to fail with \"%s\", failed with: %s", index + 1,
                                             name, spec.error_contains.c_str(), s.message().c_str()));
    }
    return Status::Ok();
  }
  if (!s.ok()) return Status(s.code(), format_message("step %zu (%s): %s", index + 1, name, s.message().c_str()));
  return Status::Ok();
}

Status Session::compare_outputs(RunStats* r) const {
  step("computing the CPU reference");
  auto want = reference_outputs();
  if (!want.ok()) return with_metadata_hint(want.status(), config_);
  auto got = read_outputs();
  if (!got.ok()) return got.status();
  const std::vector<float>& w = want.value();
  const std::vector<float>& g = got.value();
  const NmseResult n = nmse(w.data(), g.data(), std::min(w.size(), g.size()));
  // the worst of the comparisons so far
  r->checked = true;
  r->nmse = std::max(r->nmse, n.nmse);
  r->nan_mismatch = r->nan_mismatch || n.nan_mismatch || w.size() != g.size();
  r->non_finite = std::max(r->non_finite, n.non_finite);
  return Status::Ok();
}

Result<RunStats> Session::finish_run(bool check_numerics, RunStats r) {
  // a failure of queued work (an asynchronous device) is the run's failure
  step("computing");
  if (Status sync = sched_->synchronize(); !sync.ok()) return sync;
  sim_->finish();
  r.trace_last = sim_->trace().events.size();
  r.trace_first = std::min(eval_first_event_, r.trace_last);
  r.makespan_us = summarize(sim_->trace(), r.trace_first, r.trace_last).makespan_us;
  r.weight_upload_us = weight_upload_us();
  r.races = sim_->races().size();
  r.errors = sim_->errors();
  if (check_numerics && config_.sim.mode == MemoryMode::kBacked) TS_RETURN_IF_ERROR(compare_outputs(&r));
  return r;
}

}  // namespace tessera::harness
