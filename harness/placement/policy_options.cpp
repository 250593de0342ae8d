// The placement-option table (see tessera/harness/placement/policy_options.h): each option's names, its command-line
// reader and its scenario-file reader side by side, so the two front ends cannot drift apart.
#include "tessera/harness/placement/policy_options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "policy_json.h"

namespace tessera::harness {

namespace {

using json_read::json;

// ---- the command line's values ----

Status bad_text(const PolicyOption& o, const std::string& text, const std::string& expected) {
  const std::string flag = o.flags.substr(0, o.flags.find(','));
  return Status(StatusCode::kInvalidArgument, flag + " " + text + ": expected " + expected);
}

// A whole number in [lo, hi], the whole text.
bool parse_int(std::string_view text, int lo, int hi, int* out) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// A finite number, the whole text.
bool parse_number(const std::string& text, double* out) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// "LEFT=RIGHT" split at the last '=' (a regular expression may contain '='); both sides non-empty.
bool split_pair(const std::string& text, std::string* left, std::string* right) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) return false;
  *left = text.substr(0, eq);
  *right = text.substr(eq + 1);
  return true;
}

// -ngl's value (common/arg.cpp, "-ngl": a number, "auto" or "all"): -1 for all. llama.cpp's "auto" fits the layers to
// free memory (llama_params_fit); Tessera offloads all of them and leaves fitting to `tessera fit`.
bool parse_ngl(const std::string& text, int* out) {
  if (text == "all" || text == "auto" || text == "-1") {
    *out = -1;
    return true;
  }
  return parse_int(text, 0, 1000000, out);
}

// -ot's value (common/arg.cpp, "--override-tensor"): "PATTERN=BUFT" pairs separated by commas, each split at its
// first '='. Weights only, as in llama.cpp.
bool parse_override_tensor(const std::string& text, std::vector<TensorOverride>* out) {
  for (const std::string& pair : split_commas(text)) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == pair.size()) return false;
    out->push_back({pair.substr(0, eq), pair.substr(eq + 1), true});
  }
  return true;
}

// -cmoe and -ncmoe (common/arg.cpp): overrides to the CPU buffer type with common/common.h's LLM_FFN_EXPS_REGEX, for
// every layer (-cmoe) or, as llm_ffn_exps_block_regex(i) does, for layers 0 .. N-1 (-ncmoe N).
constexpr const char* kFfnExpsRegex = R"(\.ffn_(up|down|gate|gate_up)_(ch|)exps)";
void add_cpu_moe(PlacementPolicy* p) { p->overrides.push_back({kFfnExpsRegex, "CPU", true}); }
void add_n_cpu_moe(int n, PlacementPolicy* p) {
  for (int i = 0; i < n; ++i) p->overrides.push_back({"blk\\." + std::to_string(i) + kFfnExpsRegex, "CPU", true});
}

bool parse_split_mode(const std::string& text, SplitMode* out) {
  if (text == "layer")
    *out = SplitMode::kLayer;
  else if (text == "none")
    *out = SplitMode::kNone;
  else if (text == "row")
    *out = SplitMode::kRow;
  else if (text == "tensor")
    *out = SplitMode::kTensor;
  else
    return false;
  return true;
}

// The limits both front ends check.
constexpr int kMaxLayerCount = 1000000;
constexpr int kMinSplitInputs = 10;  // one node can bring 10 sources (the scheduler's own minimum)
constexpr int kMaxSplitInputs = 1000000;

// ---- one table entry: names, then the two readers ----

struct Entry {
  PolicyOption option;
  Status (*text)(const PolicyOption& o, const std::string& text, PlacementPolicy* p);
  void (*json)(const json& v, const std::string& path, PlacementPolicy* p);
};

const std::vector<Entry>& entries() {
  using namespace json_read;
  static const std::vector<Entry> table = {
      {{"n_gpu_layers", "--ngl,--n-gpu-layers,--gpu-layers", "N|all|auto",
        "llama.cpp's -ngl: the output layer first, then the last N-1 layers (all, auto, -1: everything)", false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_ngl(t, &p->n_gpu_layers)) {
           return bad_text(o, t, "a whole number of layers from 0 to 1000000, or all, auto or -1 for all");
         }
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         if (v.is_string()) {
           if (!parse_ngl(v.get<std::string>(), &p->n_gpu_layers) || p->n_gpu_layers >= 0) {
             json_read::fail(path, "expected a whole number of layers from 0 to 1000000, or \"all\", \"auto\" or -1");
           }
           return;
         }
         p->n_gpu_layers = get_int(v, path);
         if (p->n_gpu_layers < -1 || p->n_gpu_layers > kMaxLayerCount) {
           json_read::fail(path, "expected a whole number of layers from 0 to 1000000, or \"all\", \"auto\" or -1");
         }
       }},

      {{"tensor_split", "--tensor-split,--split", "A,B,...",
        "llama.cpp's -ts: shares of the offloaded layers per GPU, e.g. 3,1 or 3/1 (default: each GPU's free memory)",
        true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         std::string commas = t;  // llama.cpp takes ',' or '/' between the shares
         for (char& ch : commas) ch = ch == '/' ? ',' : ch;
         for (const std::string& part : split_commas(commas)) {
           double v = 0;
           if (!parse_number(part, &v)) return bad_text(o, t, "numbers separated by commas, e.g. 3,1");
           p->tensor_split.push_back(v);
         }
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->tensor_split = get_list<double>(v, path, "numbers", [](const json& e, const std::string& ep) {
           const double d = get_number(e, ep);
           if (!(d >= 0)) fail(ep, "expected a proportion >= 0, got " + describe(e));
           return d;
         });
       }},

      {{"layers_per_device", "--layers-per-device", "A,B,...",
        "explicit layer counts per GPU, e.g. 20,12 (overrides n_gpu_layers and tensor_split)", true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         for (const std::string& part : split_commas(t)) {
           int v = 0;
           if (!parse_int(part, 0, kMaxLayerCount, &v)) {
             return bad_text(o, t, "layer counts (0 to 1000000) separated by commas, e.g. 20,12");
           }
           p->layers_per_device.push_back(v);
         }
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->layers_per_device = get_list<int>(v, path, "layer counts", [](const json& e, const std::string& ep) {
           // Range-checked, not clamped: 4294967298 must be an error naming the entry, not a million layers.
           return static_cast<int>(
               get_count(e, ep, "a layer count (a whole number from 0 to 1000000)", kMaxLayerCount));
         });
       }},

      {{"overrides", "--override", "REGEX=TARGET",
        "tensors whose name matches go to a device or buffer type, e.g. 'ffn_.*_exps=cpu' (first match wins)", true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         TensorOverride ov;
         if (!split_pair(t, &ov.pattern, &ov.target)) return bad_text(o, t, "REGEX=TARGET");
         p->overrides.push_back(std::move(ov));
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->overrides = get_list<TensorOverride>(v, path, "override objects", [](const json& e, const std::string& ep) {
           expect_object(e, ep, {"pattern", "target"}, "an override {\"pattern\": regex, \"target\": device}");
           TensorOverride o;
           o.pattern = get_string(required(e, ep, "pattern", "a regular expression"), child(ep, "pattern"));
           o.target = get_string(required(e, ep, "target", "a device or buffer type"), child(ep, "target"));
           return o;
         });
       }},

      {{"split_mode", "--split-mode", "none|layer|row|tensor",
        "llama.cpp's -sm: layer (default) splits the layers across the GPUs, none uses the main GPU alone, row splits "
        "the layers too and each matrix's rows across every GPU (-ts shares), tensor splits weights and KV cache "
        "across the GPUs by heads and rows (llama.cpp's meta device; `plan` only so far)",
        false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_split_mode(t, &p->split_mode)) return bad_text(o, t, "none, layer, row or tensor");
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         if (!parse_split_mode(get_string(v, path), &p->split_mode))
           fail(path, "expected \"none\", \"layer\", \"row\" or \"tensor\"");
       }},

      {{"main_gpu", "--main-gpu", "N", "llama.cpp's -mg: the GPU (0, 1, ...) that split_mode none uses", false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_int(t, 0, 1000000, &p->main_gpu)) return bad_text(o, t, "a GPU index from 0");
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->main_gpu = static_cast<int>(get_count(v, path, "a GPU index from 0", 1000000));
       }},

      {{"override_tensor", "--override-tensor", "REGEX=BUFT,...",
        "llama.cpp's -ot: weights whose name matches go to that buffer type (CPU, CUDA0, CUDA1, CUDA_Host, or a "
        "Tessera device or buffer type name); first match wins",
        true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_override_tensor(t, &p->overrides)) return bad_text(o, t, "REGEX=BUFT[,REGEX=BUFT...]");
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         const auto texts =
             get_list<std::string>(v, path, "-ot values such as \"ffn_.*=CPU\"",
                                   [](const json& e, const std::string& ep) { return get_string(e, ep); });
         for (size_t i = 0; i < texts.size(); ++i) {
           if (!parse_override_tensor(texts[i], &p->overrides)) {
             fail(element(path, i), "expected REGEX=BUFT[,REGEX=BUFT...], got " + quote(texts[i]));
           }
         }
       }},

      {{"cpu_moe", "--cpu-moe", "", "llama.cpp's -cmoe: every layer's expert weights stay on the CPU", false},
       [](const PolicyOption&, const std::string&, PlacementPolicy* p) {
         add_cpu_moe(p);
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         if (get_bool(v, path)) add_cpu_moe(p);
       }},

      {{"n_cpu_moe", "--n-cpu-moe", "N", "llama.cpp's -ncmoe: the expert weights of layers 0 .. N-1 stay on the CPU",
        false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         int n = 0;
         if (!parse_int(t, 0, kMaxLayerCount, &n)) return bad_text(o, t, "a whole number of layers from 0 to 1000000");
         add_n_cpu_moe(n, p);
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         add_n_cpu_moe(
             static_cast<int>(get_count(v, path, "a whole number of layers from 0 to 1000000", kMaxLayerCount)), p);
       }},

      {{"kv_offload", "--no-kv-offload", "",
        "llama.cpp's -nkvo: the KV cache stays in host memory (a file says \"kv_offload\": false)", false},
       [](const PolicyOption&, const std::string&, PlacementPolicy* p) {
         p->kv_offload = false;
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) { p->kv_offload = get_bool(v, path); }},

      {{"pins", "--pin", "TENSOR=DEVICE", "run (or keep) the tensor of that name on a device's backend", true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         TensorPin pin;
         if (!split_pair(t, &pin.tensor, &pin.device)) return bad_text(o, t, "TENSOR=DEVICE");
         p->pins.push_back(std::move(pin));
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->pins = get_list<TensorPin>(v, path, "pin objects", [](const json& e, const std::string& ep) {
           expect_object(e, ep, {"tensor", "device"}, "a pin {\"tensor\": name, \"device\": name}");
           TensorPin pin;
           pin.tensor = get_string(required(e, ep, "tensor", "a tensor name"), child(ep, "tensor"));
           pin.device = get_string(required(e, ep, "device", "a device name"), child(ep, "device"));
           return pin;
         });
       }},

      {{"op_offload", "--no-op-offload", "",
        "do not let GPUs take ops whose weights are in host memory (a file says \"op_offload\": false)", false},
       [](const PolicyOption&, const std::string&, PlacementPolicy* p) {
         p->op_offload = false;
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) { p->op_offload = get_bool(v, path); }},

      {{"parallel", "--pipeline-parallel,--parallel", "",
        "pipeline parallelism (several in-flight copies of inputs; --parallel N is llama.cpp's -np N)", false},
       [](const PolicyOption&, const std::string&, PlacementPolicy* p) {
         p->parallel = true;
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) { p->parallel = get_bool(v, path); }},

      {{"n_copies", "--n-copies", "N",
        "with --parallel: in-flight copy slots, 1 to 4 (llama.cpp's GGML_SCHED_MAX_COPIES; default 4)", false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_int(t, 1, kParallelCopies, &p->n_copies)) return bad_text(o, t, "a whole number from 1 to 4");
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         const int n = get_int(v, path);
         if (n < 1 || n > kParallelCopies) fail(path, "expected a whole number from 1 to 4 (in-flight copy slots)");
         p->n_copies = n;
       }},
      {{"plan_reuse", "--no-plan-reuse", "",
        "plan every allocation afresh: no reuse of the plan of a graph allocated again with the same structure (a "
        "file says \"plan_reuse\": false)",
        false},
       [](const PolicyOption&, const std::string&, PlacementPolicy* p) {
         p->reuse = false;
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) { p->reuse = get_bool(v, path); }},
      {{"max_split_inputs", "--max-split-inputs", "N", "inputs per split (10 to 1000000)", false},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         if (!parse_int(t, kMinSplitInputs, kMaxSplitInputs, &p->max_split_inputs)) {
           return bad_text(o, t, "a whole number between 10 and 1000000 (one node can bring 10 inputs)");
         }
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         const int n = get_int(v, path);
         if (n < kMinSplitInputs)
           fail(path, "expected a whole number between 10 and 1000000 (one node can bring 10 inputs)");
         p->max_split_inputs = n;
       }},
      {{"scheduler_devices", "--scheduler-devices", "A,B,...",
        "the devices whose backends the scheduler gets, by name (the CPU among them; default: all)", true},
       [](const PolicyOption& o, const std::string& t, PlacementPolicy* p) {
         for (const std::string& part : split_commas(t)) {
           if (part.empty()) return bad_text(o, t, "device names separated by commas, e.g. gpu0,cpu");
           p->scheduler_devices.push_back(part);
         }
         return Status::Ok();
       },
       [](const json& v, const std::string& path, PlacementPolicy* p) {
         p->scheduler_devices = get_list<std::string>(
             v, path, "device names", [](const json& e, const std::string& ep) { return get_string(e, ep); });
         if (p->scheduler_devices.empty()) fail(path, "expected at least one device name");
       }},
  };
  return table;
}

}  // namespace

const std::vector<PolicyOption>& policy_options() {
  static const std::vector<PolicyOption> options = [] {
    std::vector<PolicyOption> o;
    for (const Entry& e : entries()) o.push_back(e.option);
    return o;
  }();
  return options;
}

Status apply_policy_option(const std::string& key, const std::string& text, PlacementPolicy* policy) {
  for (const Entry& e : entries()) {
    if (e.option.key == key) return e.text(e.option, text, policy);
  }
  return Status(StatusCode::kInvalidArgument, "no placement option named \"" + key + "\"");
}

void read_policy_json(const json& v, const std::string& path, PlacementPolicy* policy) {
  std::vector<const char*> keys;
  for (const Entry& e : entries()) keys.push_back(e.option.key.c_str());
  json_read::expect_object(v, path, keys, "a policy object");
  for (const Entry& e : entries()) {
    if (const json* x = json_read::member(v, e.option.key.c_str()))
      e.json(*x, json_read::child(path, e.option.key), policy);
  }
}

}  // namespace tessera::harness
