// The backend conformance suite, tensor I/O: blocking and async set / get / memset (whole, partial, through
// views), the stored bytes of every type, range and allocation errors, and copies within the backend, to and from
// host memory and to and from the CPU backend.
#include <gmock/gmock.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"
#include "tessera/cpu.h"

namespace tessera::conformance {

namespace {

// Host-side encoding of values (flat, contiguous rows) with the type's reference conversion.
std::vector<uint8_t> encode(Type type, const std::vector<float>& values) {
  if (type == Type::kI32) {
    std::vector<uint8_t> out(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
  }
  std::vector<uint8_t> out(row_size(type, static_cast<int64_t>(values.size())));
  type_traits(type).from_float(values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<float> decode(Type type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  if (type == Type::kI32) {
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
    return out;
  }
  type_traits(type).to_float(bytes.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

}  // namespace

TEST_P(BackendConformance, TensorSetGetRoundTrip) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 3);
    ASSERT_NE(t, nullptr);
    set_name(*t, "io_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    std::vector<uint8_t> expected = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, expected.data(), 0, n));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "full round trip";

    std::vector<std::pair<size_t, size_t>> ranges = {{0, 1}, {n - 1, 1}, {0, n / 2}, {n / 2, n - n / 2}};
    std::uniform_int_distribution<size_t> off_d(0, n - 1);
    for (int i = 0; i < 8; ++i) {
      const size_t off = off_d(rng_);
      ranges.push_back({off, std::uniform_int_distribution<size_t>(1, n - off)(rng_)});
    }
    for (auto [off, size] : ranges) {
      SCOPED_TRACE(::testing::Message() << "range [" << off << ", " << off + size << ") of " << n);
      std::vector<uint8_t> part = random_bytes(size, rng_);
      CONF_ASSERT_OK(tensor_set(*t, part.data(), off, size));
      std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(off));
      std::vector<uint8_t> got(size);
      CONF_ASSERT_OK(tensor_get(*t, got.data(), off, size));
      EXPECT_TRUE(BytesEqual(part, got)) << "partial get";
      EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "bytes outside the range must be untouched";
    }
  }
}

TEST_P(BackendConformance, TensorValuesRoundTrip) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 96, 5);
    ASSERT_NE(t, nullptr);
    set_name(*t, "values_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const std::vector<float> values = random_values(*t, rng_);
    CONF_ASSERT_OK(tensor_from_f32(*t, values));
    // The stored bytes are exactly the type's reference encoding, and decoding gives the reference values. What is
    // under test here is the backend's storage; the reference conversions themselves are checked against independent
    // computations in tests/unit/core/test_types.cpp.
    const std::vector<uint8_t> encoded = encode(type, values);
    EXPECT_TRUE(BytesEqual(encoded, read_bytes(*t)));
    auto got = tensor_to_f32(*t);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const std::vector<float> expected = decode(type, encoded, values.size());
    ASSERT_EQ(got.value().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got.value()[i], expected[i]) << "flat index " << i;
    }
  }
}

TEST_P(BackendConformance, TensorMemset) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 4);
    ASSERT_NE(t, nullptr);
    set_name(*t, "memset_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    std::vector<uint8_t> expected = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, expected.data(), 0, n));
    const size_t off = std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
    const size_t size = std::uniform_int_distribution<size_t>(1, n - off)(rng_);
    const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*t, value, off, size));
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(off), size, value);
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "memset [" << off << ", " << off + size << ")";
    const uint8_t value2 = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*t, value2, 0, n));
    EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(n, value2), read_bytes(*t))) << "full memset";
  }
}

TEST_P(BackendConformance, ViewsReadWriteThroughSource) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* a = ctx.new_tensor_2d(type, 64, 6);
    ASSERT_NE(a, nullptr);
    set_name(*a, "view_source");
    Tensor* rows = view_2d(ctx, a, 64, 2, a->nb[1], 3 * a->nb[1]);          // rows 3..4, contiguous
    Tensor* halves = view_2d(ctx, a, 32, 6, a->nb[1], row_size(type, 32));  // second half of every row
    Tensor* vv = view_1d(ctx, rows, 64, rows->nb[1]);                       // a view of a view: row 4
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    set_name(*rows, "view_rows");
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    for (Tensor* v : {rows, halves, vv}) {
      EXPECT_TRUE(is_view(*v));
      EXPECT_EQ(v->view_src, a) << "view_src is the root tensor";
      EXPECT_EQ(tensor_buffer(*v), tensor_buffer(*a));
    }
    const size_t r0 = 3 * a->nb[1];
    EXPECT_EQ(rows->view_offs, r0);
    EXPECT_EQ(vv->view_offs, 4 * a->nb[1]);

    std::vector<uint8_t> expected = random_bytes(nbytes(*a), rng_);
    CONF_ASSERT_OK(tensor_set(*a, expected.data(), 0, expected.size()));
    auto slice = [&](size_t off, size_t n) {
      return std::vector<uint8_t>(expected.begin() + static_cast<std::ptrdiff_t>(off),
                                  expected.begin() + static_cast<std::ptrdiff_t>(off + n));
    };
    EXPECT_TRUE(BytesEqual(slice(r0, nbytes(*rows)), read_bytes(*rows)));
    EXPECT_TRUE(BytesEqual(slice(row_size(type, 32), nbytes(*halves)), read_bytes(*halves)));
    EXPECT_TRUE(BytesEqual(slice(4 * a->nb[1], nbytes(*vv)), read_bytes(*vv)));

    // Writes through a view land in the source.
    std::vector<uint8_t> w = random_bytes(nbytes(*rows), rng_);
    CONF_ASSERT_OK(tensor_set(*rows, w.data(), 0, w.size()));
    std::copy(w.begin(), w.end(), expected.begin() + static_cast<std::ptrdiff_t>(r0));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "set through a view";
    // Partial write at an offset inside the view.
    const size_t off = nbytes(*rows) / 3, len = nbytes(*rows) / 4;
    std::vector<uint8_t> w2 = random_bytes(len, rng_);
    CONF_ASSERT_OK(tensor_set(*rows, w2.data(), off, len));
    std::copy(w2.begin(), w2.end(), expected.begin() + static_cast<std::ptrdiff_t>(r0 + off));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "partial set through a view";
    const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*vv, value, 0, nbytes(*vv)));
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(4 * a->nb[1]), nbytes(*vv), value);
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "memset through a view of a view";
  }
}

TEST_P(BackendConformance, TensorIoBoundsErrors) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Tensor* t = ctx.new_tensor_2d(Type::kF32, 64, 3);
  ASSERT_NE(t, nullptr);
  set_name(*t, "bounds_probe");
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  const size_t n = nbytes(*t);
  const std::vector<uint8_t> before = random_bytes(n, rng_);
  CONF_ASSERT_OK(tensor_set(*t, before.data(), 0, n));
  std::vector<uint8_t> scratch(n + 64, 0x5A);
  const std::pair<size_t, size_t> bad_ranges[] = {
      {0, n + 1}, {n - 4, 8}, {n, 1}, {n + 100, 4}, {SIZE_MAX - 1, 4}, {4, SIZE_MAX}, {SIZE_MAX, SIZE_MAX}};
  for (auto [off, size] : bad_ranges) {
    SCOPED_TRACE(::testing::Message() << "offset " << off << ", size " << size << ", nbytes " << n);
    const Status results[] = {
        tensor_set(*t, scratch.data(), off, size),
        tensor_get(*t, scratch.data(), off, size),
        tensor_memset(*t, 0x11, off, size),
        tensor_set_async(*backend_, *t, scratch.data(), off, size),
        tensor_get_async(*backend_, *t, scratch.data(), off, size),
    };
    const char* names[] = {"tensor_set", "tensor_get", "tensor_memset", "tensor_set_async", "tensor_get_async"};
    for (size_t i = 0; i < std::size(results); ++i) {
      EXPECT_FALSE(results[i].ok()) << names[i] << " accepted an out-of-range byte range";
      EXPECT_THAT(results[i].message(), ::testing::HasSubstr("bounds_probe")) << names[i] << " must name the tensor";
    }
    EXPECT_TRUE(backend_->synchronize().ok());
  }
  EXPECT_TRUE(BytesEqual(before, read_bytes(*t))) << "a rejected write must not touch the tensor";
}

TEST_P(BackendConformance, TensorIoUnallocatedErrors) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Tensor* unplaced = ctx.new_tensor_1d(Type::kF32, 64);
  Tensor* no_buffer = ctx.new_tensor_1d(Type::kF32, 64);
  Tensor* src = ctx.new_tensor_1d(Type::kF32, 128);
  Tensor* view = view_1d(ctx, src, 64, 64);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  set_name(*unplaced, "never_placed");
  set_name(*no_buffer, "data_without_buffer");
  set_name(*src, "unplaced_source");
  set_name(*view, "view_of_unplaced");
  // A data pointer but no buffer: still not allocated.
  std::vector<float> host(64, 1.5f);
  no_buffer->data = host.data();
  std::vector<uint8_t> scratch(256 * 4, 0x5A);
  for (Tensor* t : {unplaced, no_buffer, view}) {
    SCOPED_TRACE(::testing::Message() << "tensor " << t->name);
    const Status results[] = {
        tensor_set(*t, scratch.data(), 0, 16),
        tensor_get(*t, scratch.data(), 0, 16),
        tensor_memset(*t, 0x11, 0, 16),
        tensor_set_async(*backend_, *t, scratch.data(), 0, 16),
        tensor_get_async(*backend_, *t, scratch.data(), 0, 16),
    };
    const char* names[] = {"tensor_set", "tensor_get", "tensor_memset", "tensor_set_async", "tensor_get_async"};
    for (size_t i = 0; i < std::size(results); ++i) {
      EXPECT_FALSE(results[i].ok()) << names[i] << " accepted an unallocated tensor";
      EXPECT_THAT(results[i].message(), ::testing::HasSubstr(t->name)) << names[i] << " must name the tensor";
    }
    EXPECT_TRUE(backend_->synchronize().ok());
  }
  EXPECT_EQ(host, std::vector<float>(64, 1.5f)) << "nothing may be written through a buffer-less data pointer";
  EXPECT_EQ(tensor_buffer(*unplaced), nullptr);
  EXPECT_EQ(tensor_buffer(*view), nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// Async I/O.

TEST_P(BackendConformance, AsyncTensorIo) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 5);
    ASSERT_NE(t, nullptr);
    set_name(*t, "async_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    // Two queued writes, the second overlapping the first: stream order decides.
    const std::vector<uint8_t> first = random_bytes(n, rng_);
    const size_t off = std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
    const size_t len = std::uniform_int_distribution<size_t>(1, n - off)(rng_);
    const std::vector<uint8_t> second = random_bytes(len, rng_);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *t, first.data(), 0, n));
    CONF_ASSERT_OK(tensor_set_async(*backend_, *t, second.data(), off, len));
    EXPECT_TRUE(backend_->synchronize().ok());
    std::vector<uint8_t> expected = first;
    std::copy(second.begin(), second.end(), expected.begin() + static_cast<std::ptrdiff_t>(off));

    std::vector<uint8_t> got(n, 0);
    std::vector<uint8_t> got_part(len, 0);
    CONF_ASSERT_OK(tensor_get_async(*backend_, *t, got.data(), 0, n));
    CONF_ASSERT_OK(tensor_get_async(*backend_, *t, got_part.data(), off, len));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(expected, got)) << "async get after async sets";
    EXPECT_TRUE(BytesEqual(second, got_part)) << "partial async get";
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "blocking get after async sets";
  }

  // Set, compute and get queued on the stream without a synchronize in between.
  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 4096);
  Tensor* y = scale(ctx, x, 2.0f, 0.0f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  Graph graph;
  CONF_ASSERT_OK(graph.build_forward(y));
  if (!backend_->supports_op(*y)) GTEST_SKIP() << "backend does not claim SCALE f32";
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  std::vector<float> xs = signed_values()(*x, rng_);
  std::vector<float> ys(xs.size(), 0.0f);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, xs.data(), 0, nbytes(*x)));
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  CONF_ASSERT_OK(tensor_get_async(*backend_, *y, ys.data(), 0, nbytes(*y)));
  EXPECT_TRUE(backend_->synchronize().ok());
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(ys[i], 2.0f * xs[i]) << "element " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// Copies.

TEST_P(BackendConformance, CopyWithinBackend) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* a = ctx.new_tensor_2d(type, 64, 7);
    Tensor* b = ctx.new_tensor_2d(type, 64, 7);
    ASSERT_TRUE(ctx.ok());
    set_name(*a, "copy_src");
    set_name(*b, "copy_dst");
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const std::vector<uint8_t> data = random_bytes(nbytes(*a), rng_);
    CONF_ASSERT_OK(tensor_set(*a, data.data(), 0, data.size()));
    CONF_ASSERT_OK(tensor_memset(*b, 0x3C, 0, nbytes(*b)));
    CONF_ASSERT_OK(tensor_copy(*a, *b));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*b)));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*a))) << "the source must be untouched";
  }
}

TEST_P(BackendConformance, CopyBetweenBackendAndHost) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context dctx(no_alloc());
    Context hctx(no_alloc());
    Tensor* d = dctx.new_tensor_3d(type, 64, 5, 2);
    Tensor* h = hctx.new_tensor_3d(type, 64, 5, 2);
    ASSERT_TRUE(dctx.ok() && hctx.ok());
    set_name(*d, "device_tensor");
    set_name(*h, "host_tensor");
    CONF_ASSIGN_BUFFER(dbuf, alloc_on(dctx, buft()));
    CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu::buffer_type()));
    EXPECT_TRUE(hbuf->is_host());

    const std::vector<uint8_t> to_host = random_bytes(nbytes(*d), rng_);
    CONF_ASSERT_OK(tensor_set(*d, to_host.data(), 0, to_host.size()));
    CONF_ASSERT_OK(tensor_copy(*d, *h));
    EXPECT_TRUE(BytesEqual(to_host, read_bytes(*h))) << "backend -> host";

    const std::vector<uint8_t> to_dev = random_bytes(nbytes(*h), rng_);
    CONF_ASSERT_OK(tensor_set(*h, to_dev.data(), 0, to_dev.size()));
    CONF_ASSERT_OK(tensor_copy(*h, *d));
    EXPECT_TRUE(BytesEqual(to_dev, read_bytes(*d))) << "host -> backend";
  }
}

TEST_P(BackendConformance, CopyAsyncWithCpuBackend) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context dctx(no_alloc());
    Context hctx(no_alloc());
    Tensor* d = dctx.new_tensor_2d(type, 64, 9);
    Tensor* h = hctx.new_tensor_2d(type, 64, 9);
    ASSERT_TRUE(dctx.ok() && hctx.ok());
    set_name(*d, "async_device_tensor");
    set_name(*h, "async_host_tensor");
    CONF_ASSIGN_BUFFER(dbuf, alloc_on(dctx, buft()));
    CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu_->default_buffer_type()));

    const std::vector<uint8_t> v1 = random_bytes(nbytes(*d), rng_);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *d, v1.data(), 0, v1.size()));  // queued before the copy
    CONF_ASSERT_OK(tensor_copy_async(*backend_, *cpu_, *d, *h));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(v1, read_bytes(*h))) << "backend -> CPU backend";

    const std::vector<uint8_t> v2 = random_bytes(nbytes(*h), rng_);
    CONF_ASSERT_OK(tensor_set(*h, v2.data(), 0, v2.size()));
    CONF_ASSERT_OK(tensor_copy_async(*cpu_, *backend_, *h, *d));
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(v2, read_bytes(*d))) << "CPU backend -> backend";
  }
}

TEST_P(BackendConformance, CopyMismatchedLayoutFails) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Context hctx(no_alloc());
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 32, 32);
  Tensor* other_type = ctx.new_tensor_2d(Type::kF16, 32, 32);
  Tensor* other_shape = ctx.new_tensor_2d(Type::kF32, 64, 16);  // same element count
  Tensor* bigger = ctx.new_tensor_2d(Type::kF32, 32, 33);
  Tensor* square = ctx.new_tensor_2d(Type::kF32, 32, 32);
  Tensor* transposed = transpose(ctx, square);  // same type and ne as a, other strides
  Tensor* host_other = hctx.new_tensor_2d(Type::kF32, 64, 16);
  ASSERT_TRUE(ctx.ok() && hctx.ok());
  set_name(*a, "layout_src");
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu::buffer_type()));
  CONF_ASSERT_OK(fill_random(*a, rng_));
  for (Tensor* dst : {other_type, other_shape, bigger, transposed, host_other}) {
    SCOPED_TRACE(::testing::Message() << "dst " << describe(*dst));
    const std::vector<uint8_t> before = read_bytes(*dst);
    EXPECT_FALSE(tensor_copy(*a, *dst).ok());
    const std::vector<uint8_t> a_before = read_bytes(*a);
    EXPECT_FALSE(tensor_copy(*dst, *a).ok());
    EXPECT_TRUE(BytesEqual(a_before, read_bytes(*a))) << "a rejected copy must not write";
    Backend& dst_backend = dst == host_other ? *cpu_ : *backend_;
    EXPECT_FALSE(tensor_copy_async(*backend_, dst_backend, *a, *dst).ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(before, read_bytes(*dst))) << "a rejected copy must not write";
  }
}

}  // namespace tessera::conformance
