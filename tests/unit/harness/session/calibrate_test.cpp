// `tessera calibrate` (docs/calibrate.md): the suite runs on this machine's CPU backend and gives a valid device; the
// check times and simulates every fixture graph. Its accuracy depends on the machine and is measured by hand
// (bench/RESULTS.md, "tessera calibrate"), not asserted here: a shared CI machine's timings are not a test's oracle.
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/harness/session/calibrate.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;

TEST(Calibrate, MeasuresAValidCpuAndChecksEveryFixtureGraph) {
  CalibrateOptions o;
  o.repeats = 1;
  // One thread: the measurements and the check graphs' fill are the same on any number, and the coverage build's
  // gcov counters (atomic) make two threads of one loop contend for them: this test took 209 s there on two threads
  // and 85 s on one (2 cores, -Og).
  o.threads = 1;
  int lines = 0;
  o.progress = [&lines](const std::string&) { ++lines; };
  auto run = calibrate(o, /*check=*/true, &builtin_registry());
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  const Calibration& c = run.value().calibration;
  EXPECT_EQ(lines, 2) << "a line per round: the warm-up and one timed round";
  // the device is a wrapped CPU whose figures are the measurements, and a topology of it alone is valid
  EXPECT_EQ(c.device.type, DeviceType::kCpu);
  EXPECT_EQ(c.device.wraps, "CPU");
  EXPECT_GT(c.device.cost.mem_bandwidth, 0);
  EXPECT_GT(c.device.cost.flops_quant, 0);
  EXPECT_GT(c.device.cost.launch_overhead_us, 0);
  sim::TopologyConfig t;
  t.name = "calibrated";
  t.devices = {c.device};
  EXPECT_TRUE(validate_topology(t).ok()) << validate_topology(t).message();
  // written and read back as a topology file, the same device
  auto back = parse_topology(topology_to_json(t), "calibrated.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_DOUBLE_EQ(back.value().devices[0].cost.flops_f16, c.device.cost.flops_f16);
  EXPECT_EQ(c.measurements.size(), 9u);
  for (const Measurement& m : c.measurements) {
    EXPECT_GT(m.value, 0) << m.name;
    EXPECT_GE(m.spread, 0) << m.name;
  }
  EXPECT_EQ(c.threads, 1);
  // four fixture graphs: q4_0 and f16 at 1 and 512 tokens, each timed and simulated
  ASSERT_EQ(run.value().check.size(), 4u);
  for (const CheckRow& r : run.value().check) {
    EXPECT_GT(r.measured_us, 0) << r.graph;
    EXPECT_GT(r.simulated_us, 0) << r.graph;
  }
  EXPECT_EQ(run.value().check[1].tokens, 512);
  // a prompt of 512 tokens takes longer than one token, measured and simulated alike
  EXPECT_GT(run.value().check[1].simulated_us, run.value().check[0].simulated_us);
  EXPECT_GT(run.value().check[1].measured_us, run.value().check[0].measured_us);
}
