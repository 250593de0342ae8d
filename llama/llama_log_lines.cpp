// The llama.cpp log reader's line elements (llama_log_scan.h): which line prints what, in the formats of 2024 and
// 2025-2026. Each element returns true when it used the line.
#include <algorithm>

#include "llama_log_scan.h"

namespace tessera::llama::llama_log_scan {

namespace {

bool fn_is(std::string_view fn, std::string_view name) { return fn == name; }
bool fn_has(std::string_view fn, std::string_view part) { return fn.find(part) != std::string_view::npos; }

// "K (f16): 2560.00 MiB" in `s` after `tag` ("K (" or "V ("): the type and the MiB.
bool typed_size(std::string_view s, std::string_view tag, std::string& type, double& mib) {
  const size_t at = s.find(tag);
  if (at == std::string_view::npos) return false;
  s.remove_prefix(at + tag.size());
  const size_t close = s.find(')');
  if (close == std::string_view::npos || close == 0 || close > 32) return false;
  type = std::string(s.substr(0, close));
  s.remove_prefix(close + 1);
  return consume(s, ":") && take_number(s, mib) && consume(s, "MiB");
}

// The integer right before `word` in `s` ("131072 cells").
bool int_before(std::string_view s, std::string_view word, int64_t& out) {
  const size_t at = s.find(word);
  if (at == std::string_view::npos) return false;
  size_t b = at;
  while (b > 0 && s[b - 1] == ' ') --b;
  size_t a = b;
  while (a > 0 && is_digit(s[a - 1])) --a;
  if (a == b) return false;
  std::string_view digits = s.substr(a, b - a);
  return take_int(digits, out) && digits.empty();
}

std::string unquote(std::string_view v) {
  v = trimmed(v);
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
  return std::string(v);
}

// The word's last path component: "./build/bin/llama-cli" -> "llama-cli".
std::string_view base_name(std::string_view word) {
  const size_t slash = word.find_last_of("/\\");
  return slash == std::string_view::npos ? word : word.substr(slash + 1);
}

}  // namespace

// A command line as users paste it: "$ ./llama-cli -m ...", a shell prompt before it ("[user@host dir]$ ./llama-cli
// ..."), or the program's own path first ("./build/bin/llama-server -m ...", "**llama-server** -a ...", "`llama-cli
// ...`"): a llama.cpp program (its file name starting "llama-", or main / server) followed by at least one option.
bool is_command_line(std::string_view s) {
  if (starts_with(s, "$ ")) return true;
  std::string_view r = s;
  if (starts_with(r, "+ ")) r.remove_prefix(2);  // a shell's trace (set -x), as llama.cpp's CI prints its commands
  // a shell prompt before it: "[me@box dir]$ ", "me@box:~/dir$ ", "(base) me@box:~$ ", root's "root@box:~/dir# ",
  // PowerShell's "PS C:\dir> "
  for (std::string_view end : {"$ ", "# ", "> "}) {
    const size_t prompt = r.find(end);
    if (prompt == std::string_view::npos || prompt == 0) continue;
    const std::string_view before = r.substr(0, prompt);
    const bool looks_like_prompt =
        end == "$ " || before.find('@') != std::string_view::npos || starts_with(before, "PS ") || before.back() == '~';
    // (a "> " or "# " inside a command's own arguments is not a prompt)
    if (looks_like_prompt && (starts_with(before, "PS ") || before.find(" -") == std::string_view::npos)) {
      r = r.substr(prompt + 2);
      break;
    }
  }
  while (!r.empty() && (r.front() == '*' || r.front() == '`' || r.front() == ' ')) r.remove_prefix(1);
  // environment assignments before the program ("CUDA_VISIBLE_DEVICES=2 llama-server ...")
  while (true) {
    const size_t end = r.find(' ');
    const size_t eq = r.find('=');
    if (end == std::string_view::npos || eq == std::string_view::npos || eq > end || eq == 0) break;
    if (!std::all_of(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(eq), is_ident)) break;
    r.remove_prefix(end + 1);
  }
  const size_t sp = r.find(' ');
  if (sp == std::string_view::npos) return false;
  std::string_view program = r.substr(0, sp);
  while (!program.empty() && (program.back() == '*' || program.back() == '`')) program.remove_suffix(1);
  if (program.empty() || program.back() == ':') return false;
  const std::string_view name = base_name(program);
  const bool llama = starts_with(name, "llama-") || name == "main" || name == "server";
  return llama && r.find(" -", sp) != std::string_view::npos;
}

bool Reader::line(const std::string& text, int n) {
  std::string_view s(text);
  if (is_command_line(s)) {
    if (!log_.command) log_.command = LogText{text, n};
    return true;
  }
  // "function: body"
  std::string_view fn, body = s;
  size_t i = 0;
  while (i < s.size() && is_ident(s[i])) ++i;
  if (i > 0 && i < s.size() && s[i] == ':') {
    fn = s.substr(0, i);
    body = s.substr(i + 1);
    trim_left(body);
  }
  // llama.cpp's function names before early 2025 (print_info:, load_tensors:, llama_context: since)
  if (fn_is(fn, "llm_load_print_meta") || fn_is(fn, "llm_load_tensors") || fn_is(fn, "llama_new_context_with_model")) {
    log_.old_format = true;
  }
  // llama.cpp's -lv 4 format (2026): "I cmn  common_param: common_params_print_info: build 9849 (799fcc04a) with ..."
  if (const size_t at = s.find("common_params_print_info: build "); at != std::string_view::npos) {
    if (!log_.build) log_.build = LogText{std::string(s.substr(at + 32)), n};
    return true;
  }
  // llama-server's slots: "srv          init: initializing slots, n_slots = 1", "slot         init: id  0 | task -1 |
  // new slot n_ctx_slot = 30016"
  for (const auto& [key, field] : {std::pair{std::string_view("initializing slots, n_slots = "), &log_.context.n_slots},
                                   std::pair{std::string_view("new slot n_ctx_slot = "), &log_.context.n_ctx_slot}}) {
    if (const size_t at = s.find(key); at != std::string_view::npos) {
      std::string_view r = s.substr(at + key.size());
      int64_t v = 0;
      if (!take_int(r, v) || v <= 0) return false;
      if (!*field) *field = v;
      return true;
    }
  }
  // "build_info: b9008-cd35c1466" (2026's llama-server): the build number after the "b", then the commit
  if (fn_is(fn, "build_info") && body.size() > 1 && body[0] == 'b' && is_digit(body[1])) {
    std::string_view r = body.substr(1);
    const size_t dash = r.find('-');
    std::string text(r.substr(0, dash));
    if (dash != std::string_view::npos) text += " (" + std::string(trimmed(r.substr(dash + 1))) + ")";
    if (!log_.build) log_.build = LogText{text, n};
    return true;
  }
  // "version: 5261 (cb06a3c3)": the build as `llama-cli --version` prints it
  if (fn_is(fn, "build") || fn_is(fn, "version") || (fn_is(fn, "main") && starts_with(body, "build = "))) {
    if (!log_.build) log_.build = LogText{std::string(fn_is(fn, "main") ? body.substr(8) : body), n};
    return true;
  }
  if (fn_has(fn, "params_fit") || fn_has(fn, "fit_params")) {
    // llama.cpp's fit (common/fit.cpp; llama_params_fit before it moved to common/): its memory breakdown table is of
    // the parameters it started from, which are the run's only when it changed nothing: "no changes needed", or a fit
    // that gave up ("failed to fit params to free device memory: n_gpu_layers already set by user to 99, abort") before
    // it reduced the context (common_params_fit_impl throws after the context step).
    log_.fit_ran = true;
    if (body.find("context size reduced") != std::string_view::npos) log_.fit_reduced_ctx = true;
    if (body.find("no changes needed") != std::string_view::npos ||
        (body.find("failed to fit params") != std::string_view::npos && !log_.fit_reduced_ctx)) {
      log_.fit_unchanged = true;
    }
  }
  if (fn_has(fn, "memory_breakdown_print")) return breakdown(body, n);
  if (body.find("buffer size") != std::string_view::npos) return buffer(fn, body, n);
  if (starts_with(body, "offload")) return offload(body, n);
  if (starts_with(body, "graph nodes") || starts_with(body, "graph splits")) return graph(body, n);
  if (starts_with(body, "pipeline parallelism enabled (n_copies=")) {
    std::string_view r = body.substr(39);
    int64_t v = 0;
    if (!take_int(r, v) || !consume(r, ")")) return false;
    if (!log_.context.n_copies) log_.context.n_copies = LogInt{v, n};
    return true;
  }
  if (starts_with(body, "KV self size") || (fn_has(fn, "kv_cache") && starts_with(body, "size = "))) {
    return kv_total(fn, body, n);
  }
  if (fn_is(fn, "llama_model_loader")) return loader(body);
  // "llama_kv_cache_iswa: creating non-SWA KV cache, size = 131072 cells" (and "creating     SWA KV cache")
  if (starts_with(body, "creating") && body.find("KV cache, size = ") != std::string_view::npos) {
    std::string_view r = body.substr(8);
    const bool non_swa = consume(r, "non-SWA");
    int64_t cells = 0;
    r = r.substr(r.find(" = ") + 3);
    if (!take_int(r, cells) || !consume(r, "cells")) return false;
    (non_swa ? log_.context.kv_cells_non_swa : log_.context.kv_cells_swa) = cells;
    return true;
  }
  if (fn_is(fn, "print_info") || fn_is(fn, "llm_load_print_meta")) {
    const size_t eq = body.find('=');
    if (eq == std::string_view::npos || eq == 0) return false;
    const std::string_view key = trimmed(body.substr(0, eq));
    if (key.empty()) return false;
    log_.model.info.emplace_back(std::string(key), std::string(trimmed(body.substr(eq + 1))));
    return true;
  }
  if (body.find("using device ") != std::string_view::npos || starts_with(s, "Device ")) {
    return device(starts_with(s, "Device ") ? s : body, n);
  }
  // -sm tensor (2026): "creating a Meta device for tensor parallelism from 2 devices:", then a line per device,
  // "- device 0: CUDA0 (NVIDIA GeForce RTX 4090)"; the meta device's own line ("using device Meta() (Meta())
  // (unknown id) - 49152 MiB free") names no GPU.
  if (fn_is(fn, "llama_prepare_model_devices") && starts_with(body, "creating a Meta device")) return true;
  if (fn_is(fn, "llama_prepare_model_devices") && starts_with(body, "- device ")) {
    std::string_view r = body.substr(9);
    int64_t v = 0;
    if (!take_int(r, v) || v > 1024 || !consume(r, ": ")) return false;
    LlamaLogDevice d;
    d.line = n;
    d.index = static_cast<int>(v);
    const size_t sp = r.find(' ');
    d.name = std::string(r.substr(0, sp));
    if (sp != std::string_view::npos) {
      std::string_view desc = trimmed(r.substr(sp));
      if (starts_with(desc, "(") && desc.back() == ')') desc = desc.substr(1, desc.size() - 2);
      d.description = std::string(desc);
    }
    log_.devices.push_back(d);
    return true;
  }
  // The Vulkan backend's list (2024): "ggml_vulkan: Found 1 Vulkan devices:", then "Vulkan0: Intel(R) HD Graphics 520
  // (SKL GT2) (Intel open-source Mesa driver) | uma: 1 | fp16: 1 | warp size: 32"
  if (fn_is(fn, "ggml_vulkan") && starts_with(body, "Found ") &&
      body.find("Vulkan devices") != std::string_view::npos) {
    return true;
  }
  if (starts_with(fn, "Vulkan") && fn.size() > 6 && body.find(" | ") != std::string_view::npos) {
    std::string_view digits = fn.substr(6);
    int64_t v = 0;
    if (!take_int(digits, v) || !digits.empty() || v > 1024) return false;
    LlamaLogDevice d;
    d.name = std::string(fn);
    d.index = static_cast<int>(v);
    d.description = std::string(trimmed(body.substr(0, body.find(" | "))));
    d.line = n;
    log_.devices.push_back(d);
    return true;
  }
  // "ggml_vulkan: Device memory allocation of size 1879048192 failed." (the next lines say whose buffer it was)
  if (fn_is(fn, "ggml_vulkan") && starts_with(body, "Device memory allocation of size ")) {
    std::string_view r = body.substr(33);
    uint64_t bytes = 0;
    if (!take_u64(r, bytes) || !consume(r, "failed")) return false;
    LlamaLogFailedAlloc a;
    a.bytes = bytes;
    a.line = n;
    int vulkan = 0;  // the device, when the log listed exactly one
    for (const LlamaLogDevice& d : log_.devices) {
      if (starts_with(d.name, "Vulkan")) {
        ++vulkan;
        a.device = d.name;
        a.device_index = d.index;
      }
    }
    if (vulkan != 1) {
      a.device.clear();
      a.device_index = -1;
    }
    log_.failed_allocs.push_back(a);
    return true;
  }
  if (starts_with(body, "allocating ") || body.find("failed to allocate ") != std::string_view::npos) {
    if (failed(fn, body, n)) return true;
  }
  // "layer   3 assigned to device CUDA0, is_swa = 0" (2025-2026, debug verbosity)
  if (starts_with(body, "layer ") && body.find(" assigned to device ") != std::string_view::npos) {
    std::string_view r = body.substr(6);
    trim_left(r);
    int64_t il = 0;
    if (!take_int(r, il) || !consume(r, "assigned to device")) return false;
    trim_left(r);
    const size_t end = r.find_first_of(", ");
    const std::string device(r.substr(0, end));
    if (device.empty()) return false;
    log_.context.layer_devices.emplace_back(il, device);
    return true;
  }
  // "Tensor blk.0.ffn_up_exps.weight buffer type overriden to CPU" (llama.cpp 2025, no function name; its spelling) and
  // "tensor blk.0.ffn_up_exps.weight (123 MiB q4_K) buffer type overridden to CUDA_Host" (2026)
  if ((starts_with(s, "Tensor ") || starts_with(s, "tensor ")) &&
      (s.find(" buffer type overriden to ") != std::string_view::npos ||
       s.find(" buffer type overridden to ") != std::string_view::npos)) {
    std::string_view r = s.substr(7);
    trim_left(r);
    const size_t end = r.find_first_of(" (");
    const std::string tensor(r.substr(0, end));
    const size_t to = s.rfind(" to ");
    const std::string buft(trimmed(s.substr(to + 4)));
    if (tensor.empty() || buft.empty() || buft.find(' ') != std::string::npos) return false;
    log_.context.tensor_overrides.emplace_back(tensor, buft);
    return true;
  }
  // "loading model tensors, this can take a while... (mmap = false)"
  if (starts_with(body, "loading model tensors") && body.find("(mmap = ") != std::string_view::npos) {
    log_.context.params.emplace_back("mmap", body.find("(mmap = false)") != std::string_view::npos ? "false" : "true");
    return true;
  }
  // "n_ctx_per_seq (2048) < n_ctx_train (131072) -- the full capacity of the model will not be utilized"
  if (starts_with(body, "n_ctx_per_seq (")) {
    std::string_view r = body.substr(15);
    int64_t v = 0;
    if (!take_int(r, v) || !consume(r, ")")) return false;
    log_.context.params.emplace_back("n_ctx_per_seq", std::to_string(v));
    return true;
  }
  // early 2025: "init: kv_size = 2048, offload = 1, type_k = 'f16', ..." (llama_kv_cache_unified::init)
  if (fn_is(fn, "llama_context") || fn_is(fn, "llama_new_context_with_model") || fn_is(fn, "llama_init_from_model") ||
      fn_has(fn, "kv_cache") || fn_is(fn, "main") || (fn_is(fn, "init") && starts_with(body, "kv_size ="))) {
    if (key_values(body)) return true;
  }
  return error(body, n);
}

// "<device> [<kind>] buffer size = X MiB" ("Meta()": ggml's meta device, -sm tensor)
bool Reader::buffer(std::string_view fn, std::string_view body, int n) {
  const size_t at = body.find("buffer size");
  std::string_view head = trimmed(body.substr(0, at)), rest = body.substr(at + 11);
  // The 2024 Vulkan backend named its model buffers by the device's description ("Intel(R) HD Graphics 520 (SKL GT2)
  // buffer size = ..."): the listed device whose description starts with it.
  if (fn_has(fn, "load_tensors") && head.find(' ') != std::string_view::npos) {
    for (const LlamaLogDevice& d : log_.devices) {
      if (!d.name.empty() && starts_with(d.description, head)) {
        double mib = 0;
        if (!consume(rest, "=") || !take_number(rest, mib) || !consume(rest, "MiB")) return false;
        log_.figures.buffers.push_back({d.name, "model", mib, n});
        return true;
      }
    }
  }
  const size_t sp = head.find(' ');
  std::string device(head.substr(0, sp)), kind;
  if (sp != std::string_view::npos) kind = std::string(trimmed(head.substr(sp)));
  if (device.empty() || kind.find(' ') != std::string::npos) return false;
  // (ggml's meta device, -sm tensor, names its buffer type "Meta()": its constructor builds the name from a moved-from
  // list of devices)
  for (char c : device == "Meta()" ? kind : device + kind) {
    if (!(is_ident(c) || c == '-' || c == '.')) return false;
  }
  if (kind.empty()) {
    if (!fn_has(fn, "load_tensors")) return false;
    kind = "model";  // the 2024 format: "llm_load_tensors: CUDA0 buffer size = ..."
  }
  double mib = 0;
  if (!consume(rest, "=") || !take_number(rest, mib) || !consume(rest, "MiB")) return false;
  log_.figures.buffers.push_back({device, kind, mib, n});
  return true;
}

// "offloaded 30/49 layers to GPU", "offloading 30 repeating layers to GPU", "offloading output layer to GPU",
// "offloading non-repeating layers to GPU" (2024).
bool Reader::offload(std::string_view body, int n) {
  LlamaLogContext& c = log_.context;
  std::string_view r = body;
  int64_t a = 0, b = 0;
  if (consume(r, "offloaded ")) {
    if (!take_int(r, a) || !consume(r, "/") || !take_int(r, b) || !consume(r, "layers to GPU")) return false;
    if (!c.offloaded_layers) {
      c.offloaded_layers = LogInt{a, n};
      c.offload_total = b;
    }
    return true;
  }
  if (!consume(r, "offloading ")) return false;
  if (consume(r, "output layer to GPU") || consume(r, "non-repeating layers to GPU")) {
    c.output_offloaded = true;
    return true;
  }
  if (!take_int(r, a) || !consume(r, "repeating layers to GPU")) return false;
  if (!c.repeating_offloaded) c.repeating_offloaded = a;
  return true;
}

// "graph nodes  = 3126", "graph splits = 5", "graph splits = 5 (with bs=512), 3 (with bs=1)", "graph splits
// (measure): 5" (2024).
bool Reader::graph(std::string_view body, int n) {
  const bool nodes = starts_with(body, "graph nodes");
  std::string_view r = body.substr(nodes ? 11 : 12);
  consume(r, "(measure)");
  if (!consume(r, "=") && !consume(r, ":")) return false;
  int64_t v = 0;
  if (!take_int(r, v)) return false;
  std::optional<LogInt>& slot = nodes ? log_.figures.graph_nodes : log_.figures.graph_splits;
  if (!slot) slot = LogInt{v, n};
  return true;
}

// "| memory breakdown [MiB] | total free self model context compute unaccounted |" (the header), then a row per GPU
// "|   - CUDA0 (L4)         | 22565 = 22371 + (5619 =  2368 +    2734 +     517) +       -5425 |", the host
// "|   - Host               |                   794 =   525 +       0 +     269                |" and other buffer
// types alike (common/fit.cpp, common_memory_breakdown_print's templates).
bool Reader::breakdown(std::string_view body, int n) {
  std::string_view r = trimmed(body);
  if (!consume(r, "|")) return false;
  if (consume(r, "memory breakdown [MiB]")) return true;  // the header
  if (!consume(r, "- ")) return false;
  const size_t bar = r.find('|');
  if (bar == std::string_view::npos) return false;
  LlamaLogBreakdownRow row;
  std::string_view name = trimmed(r.substr(0, bar));
  r.remove_prefix(bar + 1);
  if (const size_t paren = name.find(" ("); paren != std::string_view::npos && name.back() == ')') {
    row.description = std::string(name.substr(paren + 2, name.size() - paren - 3));
    name = name.substr(0, paren);
  }
  if (name.empty() || name.find(' ') != std::string_view::npos) return false;
  row.device = std::string(name);
  int64_t first = 0;
  if (!take_int(r, first) || !consume(r, "=")) return false;
  if (consume(r, "(")) return false;  // (a total without its free memory)
  trim_left(r);
  if (!r.empty() && is_digit(r[0]) && r.find('(') != std::string_view::npos) {
    // a GPU: total = free + (self = model + context + compute) + unaccounted
    int64_t free = 0;
    if (!take_int(r, free) || !consume(r, "+") || !consume(r, "(") || !take_int(r, row.self) || !consume(r, "=")) {
      return false;
    }
    row.total = first;
    row.free = free;
  } else {
    row.self = first;  // the host or another buffer type: self = model + context + compute
  }
  if (!take_int(r, row.model) || !consume(r, "+") || !take_int(r, row.context) || !consume(r, "+") ||
      !take_int(r, row.compute)) {
    return false;
  }
  if (row.total && !consume(r, ")")) return false;
  // the sums as printed (each a whole MiB of its own, so the total may be off by the rounding of its parts)
  if (row.model + row.context + row.compute > row.self + 2 || row.model + row.context + row.compute + 2 < row.self) {
    return false;
  }
  // the fit's table comes before the model is loaded (no buffer line yet); the one at exit after
  row.fit = log_.fit_ran && log_.figures.buffers.empty();
  row.line = n;
  log_.figures.breakdown.push_back(std::move(row));
  return true;
}

bool Reader::kv_total(std::string_view fn, std::string_view body, int n) {
  (void)fn;
  LlamaLogKvCache kv;
  kv.line = n;
  std::string_view r = body.substr(body.find('=') + 1);
  if (!take_number(r, kv.mib) || !consume(r, "MiB")) return false;
  int64_t v = 0;
  if (int_before(r, " cells", v)) kv.cells = v;
  if (int_before(r, " layers", v)) kv.layers = v;
  if (!typed_size(r, "K (", kv.type_k, kv.k_mib) || !typed_size(r, "V (", kv.type_v, kv.v_mib)) return false;
  log_.context.kv_caches.push_back(kv);
  return true;
}

// "- kv  42:   quantize.imatrix.entries_count i32 = 752", "- type  f32:  471 tensors", "loaded meta data with 37
// key-value pairs and 687 tensors from PATH (version GGUF V3 (latest))".
bool Reader::loader(std::string_view body) {
  std::string_view r = body;
  int64_t v = 0;
  if (consume(r, "- kv")) {
    if (!take_int(r, v) || !consume(r, ":")) return false;
    const size_t eq = r.find(" = ");
    std::string_view head = trimmed(r.substr(0, eq));
    const size_t sp = head.find(' ');
    if (eq == std::string_view::npos || sp == std::string_view::npos || sp == 0) return false;
    const std::string_view key = head.substr(0, sp), type = trimmed(head.substr(sp + 1));
    // "tokenizer.ggml.tokens arr[str,151936]": the vocabulary's size is in the type.
    if (key == "tokenizer.ggml.tokens" && type.starts_with("arr[")) {
      const size_t comma = type.find(',');
      int64_t n = 0;
      if (comma != std::string_view::npos && whole_int(type.substr(comma + 1, type.size() - comma - 2), n)) {
        log_.model.n_tokens_array = n;
      }
    }
    log_.model.kv.emplace_back(std::string(key), std::string(trimmed(r.substr(eq + 3))));
    return true;
  }
  if (consume(r, "- type")) {
    const size_t colon = r.find(':');
    if (colon == std::string_view::npos) return false;
    const std::string type(trimmed(r.substr(0, colon)));
    r.remove_prefix(colon + 1);
    if (type.empty() || !take_int(r, v) || !consume(r, "tensors")) return false;
    log_.model.tensor_types.emplace_back(type, v);
    return true;
  }
  if (consume(r, "loaded meta data with ")) {
    const size_t from = r.find(" from ");
    if (from == std::string_view::npos) return false;
    std::string_view path = r.substr(from + 6);
    const size_t version = path.rfind(" (version");
    if (version != std::string_view::npos) path = path.substr(0, version);
    if (log_.model.path.empty()) log_.model.path = std::string(trimmed(path));
    return true;
  }
  return false;
}

// "using device CUDA0 (NVIDIA GeForce RTX 3090) - 22532 MiB free", with a PCI id "(0000:31:00.0)" since 2026;
// "Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes".
bool Reader::device(std::string_view body, int n) {
  LlamaLogDevice d;
  d.line = n;
  std::string_view r = body;
  int64_t v = 0;
  if (consume(r, "Device ")) {
    if (!take_int(r, v) || v > 1024 || !consume(r, ":")) return false;
    d.index = static_cast<int>(v);
    d.description = std::string(trimmed(r));
    log_.devices.push_back(d);
    return true;
  }
  r = r.substr(r.find("using device ") + 13);
  const size_t sp = r.find(' ');
  d.name = std::string(r.substr(0, sp));
  if (d.name.empty()) return false;
  if (sp != std::string_view::npos) {
    r.remove_prefix(sp);
    const size_t dash = r.rfind(" - ");
    std::string_view desc = trimmed(r.substr(0, dash));
    // "(NVIDIA L4) (0000:31:00.0)": the name in the first parentheses, the bus id in the second.
    const size_t close = desc.find(") (");
    if (starts_with(desc, "(") && close != std::string_view::npos && desc.back() == ')') {
      d.bus_id = std::string(desc.substr(close + 3, desc.size() - close - 4));
      desc = desc.substr(0, close + 1);
    }
    if (starts_with(desc, "(") && desc.back() == ')') desc = desc.substr(1, desc.size() - 2);
    d.description = std::string(desc);
    if (dash != std::string_view::npos) {
      std::string_view f = r.substr(dash + 3);
      if (take_int(f, v) && consume(f, "MiB free")) d.free_mib = v;
    }
  }
  log_.devices.push_back(d);
  return true;
}

// "allocating 144817.04 MiB on device 0: cudaMalloc failed: out of memory" and "failed to allocate CUDA0 buffer of
// size 151851674624" (alloc_tensor_range: the weights; ggml_gallocr_reserve_n[_impl]: the compute buffer).
bool Reader::failed(std::string_view fn, std::string_view body, int n) {
  std::string_view r = body;
  double mib = 0;
  int64_t index = 0;
  if (consume(r, "allocating ")) {
    if (!take_number(r, mib) || !consume(r, "MiB on device ") || !take_int(r, index) || index > 1024) return false;
    LlamaLogFailedAlloc a;
    a.mib = mib;
    a.device_index = static_cast<int>(index);
    a.line = n;
    log_.failed_allocs.push_back(a);
    last_alloc_line_ = n;
    return true;
  }
  r = r.substr(r.find("failed to allocate ") + 19);
  const size_t sp = r.find(' ');
  if (sp == std::string_view::npos || sp == 0) return false;
  const std::string device(r.substr(0, sp));
  r.remove_prefix(sp);
  uint64_t bytes = 0;
  if (!consume(r, "buffer of size") || !take_u64(r, bytes)) return false;
  const std::string stage = fn_has(fn, "alloc_tensor_range") ? "model" : fn_has(fn, "gallocr") ? "compute" : "";
  // Joined with the "allocating ... on device N" line just before it.
  if (!log_.failed_allocs.empty() && last_alloc_line_ > 0 && n - last_alloc_line_ <= 2 &&
      !log_.failed_allocs.back().bytes) {
    LlamaLogFailedAlloc& a = log_.failed_allocs.back();
    a.device = device;
    a.bytes = bytes;
    a.stage = stage;
  } else {
    LlamaLogFailedAlloc a;
    a.device = device;
    a.bytes = bytes;
    a.stage = stage;
    a.line = n;
    log_.failed_allocs.push_back(a);
  }
  last_alloc_line_ = 0;
  return true;
}

// Lines that say a step failed: kept as text.
bool Reader::error(std::string_view body, int n) {
  static const std::string_view kMarks[] = {"failed to ", "error loading model", "unable to allocate", "out of memory"};
  for (std::string_view m : kMarks) {
    if (body.find(m) == std::string_view::npos) continue;
    log_.errors.push_back({std::string(body), n});
    // "llama_kv_cache_init: failed to allocate buffer for kv cache" (2025: "llama_kv_cache: failed to allocate
    // buffer for kv cache"): the allocation that failed just before it (alloc_tensor_range's, read as the weights')
    // was the KV cache's.
    // (a Vulkan "Device memory allocation ... failed" has no stage of its own: "")
    if (body.find("buffer for kv cache") != std::string_view::npos && !log_.failed_allocs.empty() &&
        (log_.failed_allocs.back().stage == "model" || log_.failed_allocs.back().stage.empty()) &&
        n - log_.failed_allocs.back().line <= 3) {
      log_.failed_allocs.back().stage = "kv";
    }
    // "error loading model: unable to allocate CUDA0 buffer": the failure before it was the weights'.
    if (body.find("unable to allocate") != std::string_view::npos) {
      for (LlamaLogFailedAlloc& a : log_.failed_allocs) {
        if (a.stage.empty()) a.stage = "model";
      }
    }
    return true;
  }
  return false;
}

// "n_ctx = 4096", or comma-separated "kv_size = 32768, offload = 1, type_k = 'q8_0', ...".
bool Reader::key_values(std::string_view body) {
  std::vector<std::pair<std::string, std::string>> found;
  std::string_view r = body;
  while (!r.empty()) {
    const size_t comma = r.find(", ");
    std::string_view item = r.substr(0, comma);
    r = comma == std::string_view::npos ? std::string_view() : r.substr(comma + 2);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return false;
    const std::string_view key = trimmed(item.substr(0, eq));
    if (key.empty() || !std::all_of(key.begin(), key.end(), is_ident)) return false;
    found.emplace_back(std::string(key), unquote(item.substr(eq + 1)));
  }
  if (found.empty()) return false;
  log_.context.params.insert(log_.context.params.end(), found.begin(), found.end());
  return true;
}

void Reader::finish() {
  LlamaLogContext& c = log_.context;
  // The first value printed for each key (a draft model's context comes later).
  auto param = [&](std::string_view key) -> const std::string* {
    for (const auto& [k, v] : c.params) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  auto int_param = [&](std::string_view key, std::optional<int64_t>& out) {
    int64_t v = 0;
    const std::string* s = param(key);
    if (s && whole_int(*s, v)) out = v;
  };
  int_param("n_ctx", c.n_ctx);
  // the bench tools (batched-bench, sweep-bench) print the context as n_kv_max (= llama_n_ctx)
  if (!c.n_ctx) int_param("n_kv_max", c.n_ctx);
  int_param("n_batch", c.n_batch);
  int_param("n_ubatch", c.n_ubatch);
  int_param("n_seq_max", c.n_seq_max);
  int_param("n_outputs_max", c.n_outputs_max);
  int_param("kv_size", c.kv_size);
  if (const std::string* s = param("flash_attn")) c.flash_attn = *s;
  if (const std::string* s = param("type_k")) c.type_k = *s;
  if (const std::string* s = param("type_v")) c.type_v = *s;
  if (c.type_k.empty() && !c.kv_caches.empty()) c.type_k = c.kv_caches.front().type_k;
  if (c.type_v.empty() && !c.kv_caches.empty()) c.type_v = c.kv_caches.front().type_v;

  LlamaLogModel& m = log_.model;
  auto info = [&](std::string_view key) -> const std::string* {
    for (const auto& [k, v] : m.info) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  auto kv = [&](const std::string& key) -> const std::string* {
    for (const auto& [k, v] : m.kv) {
      if (k == key) return &v;
    }
    return nullptr;
  };
  if (const std::string* s = info("arch")) m.arch = *s;
  if (m.arch.empty()) {
    if (const std::string* s = kv("general.architecture")) m.arch = *s;
  }
  if (m.arch.empty()) {
    // no general.architecture line: the prefix of the architecture's own keys ("qwen2.block_count" -> qwen2)
    for (const auto& [k, v] : m.kv) {
      const size_t dot = k.find('.');
      if (dot == std::string::npos) continue;
      const std::string rest = k.substr(dot + 1);  // only an architecture's own keys end so
      if (rest == "block_count" || rest == "embedding_length" || rest == "attention.head_count") {
        m.arch = k.substr(0, dot);
        break;
      }
    }
  }
  auto field = [&](std::string_view info_key, const std::string& kv_suffix, std::optional<int64_t>& out) {
    int64_t v = 0;
    const std::string* s = info(info_key);
    if (!s && !m.arch.empty()) s = kv(m.arch + "." + kv_suffix);
    if (s && whole_int(*s, v)) out = v;
  };
  field("n_layer", "block_count", m.n_layer);
  field("n_embd", "embedding_length", m.n_embd);
  field("n_head", "attention.head_count", m.n_head);
  field("n_head_kv", "attention.head_count_kv", m.n_head_kv);
  field("n_swa", "attention.sliding_window", m.n_swa);
  field("n_ctx_train", "context_length", m.n_ctx_train);
  field("n_expert", "expert_count", m.n_expert);
  field("n_expert_used", "expert_used_count", m.n_expert_used);
  field("n_vocab", "vocab_size", m.n_vocab);
  if (!m.n_vocab && m.n_tokens_array) m.n_vocab = m.n_tokens_array;
  auto text = [&](std::string& out, std::string_view a, std::string_view b) {
    if (const std::string* s = info(a))
      out = *s;
    else if (const std::string* t = info(b))
      out = *t;
  };
  text(m.model_type, "model type", "model type");
  text(m.model_params, "model params", "model params");
  text(m.file_type, "file type", "model ftype");
  text(m.file_size, "file size", "model size");
}

}  // namespace tessera::llama::llama_log_scan
