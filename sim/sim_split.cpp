// Row split (llama.cpp's -sm row; docs/simulator.md "Row split"): ggml-cuda's split buffer type, simulated. Each
// tensor's rows are cut over the simulator's GPUs at cumulative shares (each cut rounded down to the row rounding, the
// last GPU taking the rest); each GPU holds its slice, padded to whole 512-value rows; the main device's backend
// computes a MUL_MAT reading such a weight, every GPU with rows computing its share of the result. The bytes of a
// memory-backed buffer stay contiguous in one allocation, so the reference kernels compute the whole product.
#include <algorithm>

#include "sim_impl.h"

namespace tessera::sim {

namespace {

// ggml-cuda pads each slice's last row to a multiple of MATRIX_ROW_PADDING values (ggml-cuda.cu, the split buffer's
// init_tensor and get_alloc_size), whatever the type.
constexpr int64_t kMatrixRowPadding = 512;

BufferType* split_buffer_type_fn(Device* main, const float* tensor_split, size_t n) {
  auto* dev = dynamic_cast<SimDevice*>(main);
  return dev != nullptr ? split_buffer_type(dev, tensor_split, n) : nullptr;
}

// The layout of a split buffer type of this simulator and the position of `device` among its GPUs (-1: none);
// nullptr for any other buffer type or device.
const SplitLayout* layout_of(const BufferType& split, const Device& device, int* k) {
  const auto* bt = dynamic_cast<const SimBufferType*>(&split);
  const SplitLayout* layout = bt != nullptr ? bt->split() : nullptr;
  const auto* dev = dynamic_cast<const SimDevice*>(&device);
  if (layout == nullptr || dev == nullptr || dev->sim() != bt->sim_device()->sim()) return nullptr;
  *k = layout->position(dev->index());
  return layout;
}

size_t split_bytes_fn(const BufferType& split, const Tensor& t, const Device& device) {
  int k = -1;
  const SplitLayout* layout = layout_of(split, device, &k);
  return layout != nullptr && k >= 0 ? layout->bytes(t, static_cast<size_t>(k)) : 0;
}

bool split_rows_fn(const BufferType& split, const Tensor& t, const Device& device, int64_t* low, int64_t* high) {
  int k = -1;
  const SplitLayout* layout = layout_of(split, device, &k);
  if (layout == nullptr) return false;
  *low = *high = 0;
  if (k >= 0) layout->rows(t, static_cast<size_t>(k), low, high);
  if (*high < *low) *high = *low;
  return true;
}

}  // namespace

void* split_proc_address(const char* name) {
  if (std::string(name) == kSplitBufferTypeProc) return reinterpret_cast<void*>(&split_buffer_type_fn);
  if (std::string(name) == kSplitBytesProc) return reinterpret_cast<void*>(&split_bytes_fn);
  if (std::string(name) == kSplitRowsProc) return reinterpret_cast<void*>(&split_rows_fn);
  return nullptr;
}

int SplitLayout::position(int device) const {
  const auto at = std::find(gpus.begin(), gpus.end(), device);
  return at == gpus.end() ? -1 : static_cast<int>(at - gpus.begin());
}

void SplitLayout::rows(const Tensor& t, size_t k, int64_t* low, int64_t* high) const {
  const int64_t n = nrows(t);
  // (ggml computes nrows*tensor_split[id] in float and truncates)
  *low = k == 0 ? 0 : static_cast<int64_t>(static_cast<float>(n) * from[k]);
  *low -= *low % rounding;
  if (k + 1 == gpus.size()) {
    *high = n;
  } else {
    *high = static_cast<int64_t>(static_cast<float>(n) * from[k + 1]);
    *high -= *high % rounding;
  }
}

size_t SplitLayout::bytes(const Tensor& t, size_t k) const {
  int64_t low = 0, high = 0;
  rows(t, k, &low, &high);
  if (high <= low) return 0;
  size_t size = static_cast<size_t>(high - low) * row_size(t.type, t.ne[0]);
  if (t.ne[0] % kMatrixRowPadding != 0) size += row_size(t.type, kMatrixRowPadding - t.ne[0] % kMatrixRowPadding);
  return size;
}

SimBufferType::SimBufferType(SimDevice* dev, SplitLayout split)
    : dev_(dev), kind_(Kind::kSplit), name_(dev->config().name + "_Split"), extra_(-1), split_(std::move(split)) {}

BufferType* split_buffer_type(SimDevice* main, const float* tensor_split, size_t n) {
  Simulator::Impl& s = *main->sim();
  if (main->real() != nullptr) return nullptr;  // (a wrapped device's kernels read only the real device's buffers)
  SplitLayout layout;
  for (size_t i = 0; i < s.devices.size(); ++i) {
    if (s.devices[i]->config().type != DeviceType::kCpu) layout.gpus.push_back(static_cast<int>(i));
  }
  if (layout.position(main->index()) < 0) return nullptr;
  // ggml_backend_cuda_split_buffer_type: all zero means ggml-cuda's default_tensor_split (each GPU's total memory);
  // otherwise each GPU's share begins at the sum of the shares before it, divided by the total.
  std::vector<float> share(layout.gpus.size(), 0.0f);
  bool all_zero = true;
  for (size_t k = 0; k < share.size() && k < n; ++k) {
    share[k] = tensor_split[k];
    all_zero = all_zero && share[k] == 0.0f;
  }
  if (all_zero) {
    for (size_t k = 0; k < share.size(); ++k) {
      share[k] = static_cast<float>(s.devices[static_cast<size_t>(layout.gpus[k])]->config().memory);
    }
  }
  float sum = 0.0f;
  for (float v : share) {
    layout.from.push_back(sum);
    sum += v;
  }
  if (!(sum > 0.0f)) return nullptr;
  for (float& f : layout.from) f /= sum;
  // get_row_rounding: the largest rounding of the GPUs whose share is not empty.
  layout.rounding = 1;
  for (size_t k = 0; k < layout.gpus.size(); ++k) {
    if (layout.from[k] >= (k + 1 < layout.gpus.size() ? layout.from[k + 1] : 1.0f)) continue;
    const int r = s.devices[static_cast<size_t>(layout.gpus[k])]->config().row_rounding;
    layout.rounding = std::max<int64_t>(layout.rounding, r);
  }
  for (const auto& t : s.split_types) {
    if (t->sim_device() == main && t->split()->from == layout.from) return t.get();
  }
  s.split_types.push_back(std::make_unique<SimBufferType>(main, std::move(layout)));
  return s.split_types.back().get();
}

const SimBufferType* split_type_of(const Tensor* t) {
  if (t == nullptr) return nullptr;
  const Buffer* b = tensor_buffer(*t);
  const auto* bt = b != nullptr ? dynamic_cast<const SimBufferType*>(b->type()) : nullptr;
  return bt != nullptr && bt->kind() == SimBufferType::Kind::kSplit ? bt : nullptr;
}

Status SimBuffer::init_tensor(Tensor& t) {
  const SplitLayout* layout = type_->split();
  if (layout == nullptr) return Status::Ok();
  if (t.view_src != nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: %s is a view: views of split tensors are not supported",
                    type_->name(), t.name);
  }
  Simulator::Impl& s = *sim_device()->sim();
  std::vector<std::pair<SimDevice*, size_t>> taken;
  for (size_t k = 0; k < layout->gpus.size(); ++k) {
    const size_t bytes = layout->bytes(t, k);
    if (bytes == 0) continue;
    SimDevice* dev = s.devices[static_cast<size_t>(layout->gpus[k])].get();
    Status st = dev->reserve_memory(bytes);
    if (!st.ok()) {
      for (auto& [d, n] : taken) d->release_memory(n);
      return TS_ERROR(StatusCode::kAllocFailed, "%s: the rows of %s on %s: %s", type_->name(), t.name,
                      dev->config().name.c_str(), st.message().c_str());
    }
    ++dev->stats.n_allocs;
    taken.emplace_back(dev, bytes);
  }
  split_taken_.insert(split_taken_.end(), taken.begin(), taken.end());
  return Status::Ok();
}

double node_time_us(const SimDevice& dev, const Tensor& node) {
  const SimBufferType* bt = node.op == Op::kMulMat ? split_type_of(node.src[0]) : nullptr;
  if (bt == nullptr || node.src[1] == nullptr) return op_time_us(dev.config(), node);
  // ggml_cuda_op_mul_mat with a split weight: each GPU with rows multiplies its rows by its copy of the activations
  // (copied from the main device) and its rows of the result are copied back; the GPUs work at once.
  const Simulator::Impl& s = *dev.sim();
  const SplitLayout& layout = *bt->split();
  double slowest = 0;
  for (size_t k = 0; k < layout.gpus.size(); ++k) {
    int64_t low = 0, high = 0;
    layout.rows(*node.src[0], k, &low, &high);
    if (high <= low) continue;
    Tensor w = *node.src[0];
    w.ne[1] = high - low;
    Tensor part = node;
    part.ne[0] = high - low;
    part.src[0] = &w;
    for (Tensor* x : {&w, &part}) {  // (contiguous strides for the slices' shapes: the cost model counts bytes)
      for (int d = 2; d < kMaxDims; ++d) x->nb[d] = x->nb[d - 1] * static_cast<size_t>(x->ne[d - 1]);
    }
    part.nb[1] = part.nb[0] * static_cast<size_t>(part.ne[0]);
    part.nb[2] = part.nb[1] * static_cast<size_t>(part.ne[1]);
    part.nb[3] = part.nb[2] * static_cast<size_t>(part.ne[2]);
    const int g = layout.gpus[k];
    double t = op_time_us(s.devices[static_cast<size_t>(g)]->config(), part);
    if (g != dev.index()) {
      t += s.copy_time_us(dev.index(), g, nbytes(*node.src[1]));
      t += s.copy_time_us(
          g, dev.index(),
          static_cast<size_t>(high - low) * static_cast<size_t>(nrows(node)) * type_traits(node.type).type_size);
    }
    slowest = std::max(slowest, t);
  }
  return slowest;
}

}  // namespace tessera::sim
