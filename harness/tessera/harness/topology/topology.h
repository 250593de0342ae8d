// Topology files: JSON <-> TopologyConfig, the presets shipped with the project, and the unit parsers
// ("8 GiB", "900 GB/s", "5 us", "50 TFLOP/s") the scenario loader and the CLI share. The format is documented in
// docs/topology.md. Every error names the source (file name or "<preset NAME>"), the location (line:column for
// syntax errors, the JSON path such as devices[1].memory otherwise) and what was expected; no input crashes.
#pragma once

#include <cstddef>
#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/sim/device_config.h"
#include "tessera/harness/common/units.h"
#include "tessera/status.h"

namespace tessera::harness {

// The topology file format's version (the "version" key; docs/topology.md, "Versions"). A file without the key is
// read as version 1; a newer one is refused. No key has changed meaning yet: the version lets a later change tell the
// files written before it.
constexpr int kTopologyVersion = 1;

// Parses and validates a topology. `source` names the text in every error message.
Result<sim::TopologyConfig> parse_topology(std::string_view json_text, const std::string& source);
// Reads and parses a file; errors name the path (and the OS reason when it cannot be read).
Result<sim::TopologyConfig> load_topology_file(const std::string& path);
// A preset compiled into the library (harness/topology/presets/NAME.json); kNotFound lists the names.
Result<sim::TopologyConfig> topology_preset(const std::string& name);
std::vector<std::string> topology_preset_names();
// The embedded JSON text of a preset (nullptr when there is none of that name).
const char* topology_preset_text(const std::string& name);
// A device preset compiled into the library (harness/topology/devices/NAME.json: one GPU or CPU from its public
// specifications; docs/topology.md, "Device presets"): the device, named as in its file, and where its figures come
// from. kNotFound lists the names.
struct DevicePreset {
  sim::DeviceConfig device;
  std::vector<std::string> sources;
};
Result<DevicePreset> device_preset(const std::string& name);
std::vector<std::string> device_preset_names();
// A kernel profile: what llama.cpp's kernels of one backend reach of a device's peaks, per kernel class
// (docs/simulator.md, "Kernel classes"), and their launch overhead; one side for the GPUs, one for the CPU, each
// optional (a side left out leaves those devices as they are). Embedded profiles are harness/topology/kernels/*.json
// (docs/bench.md, "Kernel profiles").
struct KernelProfile {
  struct Side {
    std::optional<double> launch_overhead_us;
    std::optional<std::array<sim::Efficiency, sim::kKernelClassCount>> efficiency;
  };
  std::string name, description;
  std::optional<Side> gpu, cpu;
  std::vector<std::string> sources;
};
// A profile's JSON text; errors name `source` and the key.
Result<KernelProfile> parse_kernel_profile(std::string_view json_text, const std::string& source);
// An embedded profile by name, else a file (kNotFound lists the names); errors name the file and the key.
Result<KernelProfile> load_kernel_profile(const std::string& name_or_path);
std::vector<std::string> kernel_profile_names();
// Sets every GPU's (every other device's) and every CPU's launch overhead and efficiencies from the profile; adds its
// sources and " --kernels NAME" to the topology's name.
void apply_kernel_profile(const KernelProfile& profile, sim::TopologyConfig* topology);
// A preset name, else a file path.
Result<sim::TopologyConfig> load_topology(const std::string& name_or_path);

// Pretty JSON in the file format, "version" first; parse_topology reads it back to an equal config.
std::string topology_to_json(const sim::TopologyConfig& topology);

// The rules every topology obeys (docs/topology.md, "Validation"); messages name the field (devices[1].alignment).
Status validate_topology(const sim::TopologyConfig& topology);

// `tessera fit` plans with SimOptions::fit_margins: each device leaves its fit_margin free (a unified device's comes
// out of the host pool).
// "fit margins (left free): gpu0 1 GiB, ...\n", or "" when no device has one.
std::string fit_margins_note(const sim::TopologyConfig& topology);

}  // namespace tessera::harness
