// The scenario keys of run lifecycles (see scenario_steps.h, docs/scenarios.md).
#include "scenario_steps.h"

namespace tessera::scenario {

using namespace tessera::harness;

using namespace json_read;

namespace {

constexpr Session::Step kAllSteps[] = {Session::Step::kReserve,      Session::Step::kAlloc,
                                       Session::Step::kCompute,      Session::Step::kReserveNext,
                                       Session::Step::kAllocNext,    Session::Step::kComputeNext,
                                       Session::Step::kSynchronize,  Session::Step::kReset,
                                       Session::Step::kComputeAgain, Session::Step::kComputeNextAgain};

Session::Step step_of_name(const json& v, const std::string& path) {
  const std::string n = get_string(v, path, "a step name");
  for (Session::Step s : kAllSteps) {
    if (n == Session::step_name(s)) return s;
  }
  fail(path,
       "expected \"reserve\", \"alloc\", \"compute\", \"compute-again\", \"synchronize\", \"reset\" or "
       "the first four with \"-next\" (\"compute-next-again\"), got " +
           quote(n));
}

Session::StepSpec read_step(const json& v, const std::string& path) {
  Session::StepSpec spec;
  if (v.is_object()) {
    expect_object(v, path, {"step", "fails"}, "a step object {\"step\": NAME, \"fails\": true or \"TEXT\"}");
    spec.step = step_of_name(required(v, path, "step", "a step name"), child(path, "step"));
    const std::string fp = child(path, "fails");
    const json& f = required(v, path, "fails", "true or a part of the expected error");
    if (f.is_string()) {
      spec.error_contains = f.get<std::string>();
      if (spec.error_contains.empty()) fail(fp, "expected true or a non-empty part of the expected error");
    } else if (!get_bool(f, fp)) {
      fail(fp, "expected true or a part of the expected error (a step that must succeed is its name alone)");
    }
    spec.must_fail = true;
  } else {
    spec.step = step_of_name(v, path);
  }
  return spec;
}

}  // namespace

std::vector<Session::StepSpec> read_steps(const json& v, const std::string& path) {
  std::vector<Session::StepSpec> steps = get_list<Session::StepSpec>(v, path, "step names", read_step);
  if (steps.empty() || steps.size() > 1000) fail(path, "expected 1 to 1000 steps");
  return steps;
}

bool read_inputs_kind(const json& v, const std::string& path) {
  const std::string k = get_string(v, path);
  if (k == "fixed") return false;
  if (k == "per_evaluation") return true;
  fail(path, "expected \"fixed\" or \"per_evaluation\", got " + quote(k));
}

}  // namespace tessera::scenario
