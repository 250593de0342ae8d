// The report of the extra models (see tessera/llama/extra_models.h, format_extra_models).
#include "tessera/llama/extra_models.h"

#include "tessera/harness/common/text_table.h"

namespace tessera::llama {

using namespace tessera::harness;

using sim::format_bytes;

namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / 1024.0 / 1024.0; }

}  // namespace

std::string format_extra_models(const ExtraModelsPlacement& p, bool llama_log, bool wide) {
  std::string s;
  if (p.draft) {
    if (llama_log) {
      // llama-server's line before the draft's own load_tensors / llama_kv_cache / sched_reserve lines.
      s += "srv    load_model: loading draft model '" + p.draft_path + "'\n";
      if (p.draft_buffers) s += format_llama_log(*p.draft_buffers);
    } else {
      s += "draft " + p.draft_path + ": " + p.draft->describe_workload() + "\n";
      if (p.draft_buffers) s += format_memory_breakdown(*p.draft_buffers, wide);
    }
    s += "\n";
  }
  if (p.mmproj) {
    const ExtraModelsPlacement::Mmproj& m = *p.mmproj;
    if (llama_log) {
      // clip.cpp's lines (clip_ctx, load_hparams, alloc_compute_meta).
      s += format_message("clip_ctx: CLIP using %s backend\n", m.buffer_name == "CPU" ? "CPU" : m.buffer_name.c_str());
      s += format_message("load_hparams: model size:         %.2f MiB\n", mib(m.weights));
      s += format_message("warmup: warmup with image size = %lld x %lld\n", static_cast<long long>(m.model.image_size),
                          static_cast<long long>(m.model.image_size));
      s += format_message("alloc_compute_meta: %10s compute buffer size = %8.2f MiB\n", m.buffer_name.c_str(),
                          mib(m.compute));
    } else {
      s += format_message(
          "projector %s (clip, %zu tensors; warm-up image %lld x %lld, patch %lld: %lld patches): on %s (%s), weights "
          "%s, compute %s (estimate, flash attention %s)\n",
          m.model.path.c_str(), m.model.n_tensors, static_cast<long long>(m.model.image_size),
          static_cast<long long>(m.model.image_size), static_cast<long long>(m.model.patch_size),
          static_cast<long long>(m.model.n_patches()), m.device.c_str(), m.buffer_name.c_str(),
          format_bytes(m.weights).c_str(), format_bytes(m.compute).c_str(), m.flash_attn ? "on" : "off");
    }
    s += "\n";
  }
  s += "memory per device with the extra models (the main model's peak, then what each extra model adds):\n";
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"main", Align::kRight, 12},
                   {"draft", Align::kRight, 12},
                   {"mmproj", Align::kRight, 12},
                   {"total", Align::kRight, 12},
                   {"allocatable", Align::kRight, 12}});
  for (const ExtraDeviceMemory& e : p.devices) {
    table.add({e.device, format_bytes(e.main), format_bytes(e.draft()), format_bytes(e.mmproj()),
               format_bytes(e.total()), format_bytes(e.allocatable)},
              e.overflow ? "  OVERFLOW" : "");
  }
  s += table.render(wide);
  for (const std::string& o : p.overflows) s += "overflow: " + o + "\n";
  if (p.fits()) s += "the extra models fit next to the main model\n";
  return s;
}

}  // namespace tessera::llama
