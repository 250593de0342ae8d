// The backend conformance suite, events: recording after async work, host synchronize, a second stream waiting
// on the first, and re-recording.
#include <memory>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"

namespace tessera::conformance {

namespace {

::testing::AssertionResult FloatsEqual(const std::vector<float>& expected, const std::vector<float>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << actual.size() << " values, expected " << expected.size();
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(expected[i] == actual[i]) && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << expected.size() << " values differ; first at " << first
                                       << ": expected " << expected[first] << ", got " << actual[first];
}

}  // namespace

TEST_P(BackendConformance, Events) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  std::unique_ptr<Event> ev = dev->event_new();
  if (!dev->caps().events) {
    EXPECT_EQ(ev, nullptr) << "caps().events is false, so event_new must return nullptr";
    return;
  }
  ASSERT_NE(ev, nullptr) << "caps().events is true but event_new returned nullptr";
  EXPECT_EQ(ev->device(), dev);

  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 1 << 16);
  Tensor* y = scale(ctx, x, 2.0f, 0.0f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  set_name(*x, "event_x");
  set_name(*y, "event_y");
  Graph graph;
  CONF_ASSERT_OK(graph.build_forward(y));
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  auto doubled = [](std::vector<float> v) {
    for (float& f : v) f *= 2.0f;
    return v;
  };
  auto read_f32 = [](const Tensor& t) {
    auto r = tensor_to_f32(t);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r.value() : std::vector<float>{};
  };

  // (a) async set -> record -> host synchronize: the data is there.
  std::vector<float> v1 = signed_values()(*x, rng_);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v1.data(), 0, nbytes(*x)));
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(v1, read_f32(*x))) << "async set not visible after event synchronize";

  // (b) async compute -> record -> host synchronize: the result is there.
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(doubled(v1), read_f32(*y))) << "compute result not visible after event synchronize";

  // (c) a second stream on the same device waits for the first without blocking the host.
  auto second = dev->init_backend();
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  Backend& b2 = *second.value();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(::testing::Message() << (round == 0 ? "Event::record/wait" : "Backend::event_record/event_wait"));
    std::vector<float> v2 = signed_values()(*x, rng_);
    std::vector<float> out(v2.size(), 0.0f);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v2.data(), 0, nbytes(*x)));
    ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
    if (round == 0) {
      ev->record(*backend_);
      ev->wait(b2);
    } else {
      backend_->event_record(*ev);
      b2.event_wait(*ev);
    }
    CONF_ASSERT_OK(tensor_get_async(b2, *y, out.data(), 0, nbytes(*y)));
    EXPECT_TRUE(b2.synchronize().ok());
    EXPECT_TRUE(FloatsEqual(doubled(v2), out)) << "the waiting stream read before the recorded work finished";
    EXPECT_TRUE(backend_->synchronize().ok());
  }

  // (d) re-recording moves the event to the new end of the queue.
  std::vector<float> v3 = signed_values()(*x, rng_);
  ev->record(*backend_);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v3.data(), 0, nbytes(*x)));
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(doubled(v3), read_f32(*y))) << "event synchronize returned before the latest recorded point";
  EXPECT_TRUE(backend_->synchronize().ok());
}

}  // namespace tessera::conformance
