// The configuration space (config_space.h) drawn through RapidCheck: every choice is a RapidCheck draw
// (rc::gen::inRange, shrinking towards the simple value), so a failing case shrinks one choice at a time.
#pragma once

#include <rapidcheck.h>

#include "support/config_space.h"

namespace tessera::test::space {

class RcChoices : public Choices {
 public:
  int64_t in_range(int64_t lo, int64_t hi) override { return hi <= lo ? lo : *rc::gen::inRange<int64_t>(lo, hi + 1); }
};

inline rc::Gen<TopologySpec> gen_topology(int min_devices = 0, int max_devices = 15) {
  return rc::gen::exec([=] {
    RcChoices c;
    return draw_topology(c, min_devices, max_devices);
  });
}

inline rc::Gen<DeviceSpec> gen_device() {
  return rc::gen::exec([] {
    RcChoices c;
    return draw_device(c);
  });
}

inline rc::Gen<LifecycleSpec> gen_lifecycle(int max_evaluations = 8) {
  return rc::gen::exec([=] {
    RcChoices c;
    return draw_lifecycle(c, max_evaluations);
  });
}

}  // namespace tessera::test::space
