// Split GGUF models (docs/gguf.md, "Split models"): PREFIX-00001-of-0000N.gguf ..., as llama.cpp's gguf-split writes
// them; each shard has split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32).
#include <cinttypes>
#include <cstdio>
#include <unordered_map>

#include "gguf/internal.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

namespace {

using detail::quote;

constexpr std::string_view kSuffix = ".gguf";

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A decimal of at least five digits (the %05d of the names), at most 65535 (split.count is a u16).
std::optional<uint32_t> parse_number(std::string_view s) {
  if (s.size() < 5 || !all_digits(s)) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > 65535) return std::nullopt;
  }
  return static_cast<uint32_t>(v);
}

struct SplitKeys {
  bool present = false;  // split.count is there
  uint32_t no = 0;
  uint32_t count = 1;
  std::optional<int64_t> tensors;  // split.tensors.count
};

Result<SplitKeys> split_keys(const File& f) {
  SplitKeys k;
  if (f.find(kKeySplitCount) == nullptr) {
    if (f.find(kKeySplitNo) != nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: split.no without split.count", f.source.c_str());
    }
    return k;
  }
  k.present = true;
  auto count = f.get_u16(kKeySplitCount);
  if (!count.ok()) return count.status();
  auto no = f.get_u16(kKeySplitNo);
  if (!no.ok()) return no.status();
  if (*count == 0 || *no >= *count) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: split.no %u of split.count %u (0 <= split.no < split.count)",
                    f.source.c_str(), unsigned{*no}, unsigned{*count});
  }
  k.no = *no;
  k.count = *count;
  if (f.find(kKeySplitTensorsCount) != nullptr) {
    auto n = f.get_i32(kKeySplitTensorsCount);
    if (!n.ok()) return n.status();
    if (*n < 0) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: split.tensors.count is %d", f.source.c_str(), int{*n});
    }
    k.tensors = *n;
  }
  return k;
}

}  // namespace

std::string split_path(std::string_view prefix, uint32_t split_no, uint32_t split_count) {
  char tail[48];
  std::snprintf(tail, sizeof(tail), "-%05u-of-%05u.gguf", split_no + 1, split_count);
  return std::string(prefix) + tail;
}

std::optional<std::string> split_prefix(std::string_view path, uint32_t split_no, uint32_t split_count) {
  const std::string tail = split_path("", split_no, split_count);
  if (path.size() <= tail.size() || path.substr(path.size() - tail.size()) != tail) return std::nullopt;
  return std::string(path.substr(0, path.size() - tail.size()));
}

std::optional<SplitName> parse_split_path(std::string_view path) {
  // PREFIX-NNNNN-of-MMMMM.gguf
  if (path.size() < kSuffix.size() || path.substr(path.size() - kSuffix.size()) != kSuffix) return std::nullopt;
  std::string_view rest = path.substr(0, path.size() - kSuffix.size());
  const size_t of = rest.rfind("-of-");
  if (of == std::string_view::npos) return std::nullopt;
  const auto count = parse_number(rest.substr(of + 4));
  rest = rest.substr(0, of);
  const size_t dash = rest.rfind('-');
  if (dash == std::string_view::npos || dash == 0) return std::nullopt;
  const auto no = parse_number(rest.substr(dash + 1));
  if (!count || !no || *no < 1 || *no > *count) return std::nullopt;
  SplitName name;
  name.prefix = std::string(rest.substr(0, dash));
  name.split_no = *no - 1;
  name.split_count = *count;
  return name;
}

const TensorInfo* Model::find_tensor(std::string_view name, TensorRef* where) const {
  for (const TensorRef& ref : tensors) {
    const TensorInfo& t = tensor(ref);
    if (t.name == name) {
      if (where != nullptr) *where = ref;
      return &t;
    }
  }
  return nullptr;
}

Model Model::of_file(File file) {
  Model m;
  m.shards.push_back(std::move(file));
  const auto n = static_cast<uint32_t>(m.shards[0].tensors.size());
  m.tensors.reserve(n);
  for (uint32_t i = 0; i < n; ++i) m.tensors.push_back({0, i});
  return m;
}

uint64_t Model::n_bytes() const {
  uint64_t n = 0;
  for (const TensorRef& ref : tensors) n += tensor(ref).size;
  return n;
}

Result<Model> read_model(const std::string& path, const ReadOptions& options) {
  auto given = read_file(path, options);
  if (!given.ok()) return given.status();
  auto keys = split_keys(*given);
  if (!keys.ok()) return keys.status();
  Model model;
  if (!keys->present || keys->count == 1) {
    model.shards.push_back(std::move(*given));
  } else {
    // The other shards' names come from the given one's.
    const auto prefix = split_prefix(path, keys->no, keys->count);
    if (!prefix) {
      return TS_ERROR(StatusCode::kInvalidArgument,
                      "%s: split.no %u and split.count %u, but the name does not end in %s (shards are named "
                      "PREFIX-%%05d-of-%%05d.gguf)",
                      path.c_str(), keys->no, keys->count, split_path("", keys->no, keys->count).c_str());
    }
    model.shards.resize(keys->count);
    const uint32_t given_no = keys->no;
    model.shards[given_no] = std::move(*given);
    for (uint32_t i = 0; i < keys->count; ++i) {
      if (i == given_no) continue;
      const std::string shard_path = split_path(*prefix, i, keys->count);
      auto shard = read_file(shard_path, options);
      if (!shard.ok()) {
        if (shard.status().code() == StatusCode::kNotFound) {
          return TS_ERROR(StatusCode::kNotFound, "%s: shard %u of %u is missing: %s", path.c_str(), i + 1, keys->count,
                          shard.status().message().c_str());
        }
        return shard.status();
      }
      model.shards[i] = std::move(*shard);
    }
    // Every shard agrees on its place and with the first shard on the totals.
    auto first = split_keys(model.shards.front());
    if (!first.ok()) return first.status();
    if (!first->tensors) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: split model without split.tensors.count",
                      model.shards.front().source.c_str());
    }
    for (uint32_t i = 0; i < keys->count; ++i) {
      const File& f = model.shards[i];
      auto k = split_keys(f);
      if (!k.ok()) return k.status();
      if (!k->present) {
        return TS_ERROR(StatusCode::kInvalidArgument, "%s: shard %u of %u has no split.count", f.source.c_str(), i + 1,
                        keys->count);
      }
      if (k->count != keys->count || k->no != i) {
        return TS_ERROR(StatusCode::kInvalidArgument,
                        "%s: split.no %u and split.count %u, but the file is shard %u of %u (split.no %u)",
                        f.source.c_str(), k->no, k->count, i + 1, keys->count, i);
      }
      if (k->tensors && *k->tensors != *first->tensors) {
        return TS_ERROR(StatusCode::kInvalidArgument, "%s: split.tensors.count %" PRId64 ", but %s says %" PRId64,
                        f.source.c_str(), *k->tensors, model.shards.front().source.c_str(), *first->tensors);
      }
    }
  }
  // Every tensor, shard by shard; a name may appear once in the whole model.
  std::unordered_map<std::string_view, uint32_t> where;
  for (uint32_t s = 0; s < model.shards.size(); ++s) {
    const File& f = model.shards[s];
    for (uint32_t i = 0; i < f.tensors.size(); ++i) {
      auto [it, inserted] = where.emplace(f.tensors[i].name, s);
      if (!inserted) {
        return TS_ERROR(StatusCode::kInvalidArgument, "%s: tensor %s is also in %s", f.source.c_str(),
                        quote(f.tensors[i].name).c_str(), model.shards[it->second].source.c_str());
      }
      model.tensors.push_back(Model::TensorRef{s, i});
    }
  }
  const File& first = model.shards.front();
  auto first_keys = split_keys(first);
  if (!first_keys.ok()) return first_keys.status();
  if (first_keys->tensors && static_cast<uint64_t>(*first_keys->tensors) != model.tensors.size()) {
    return TS_ERROR(StatusCode::kInvalidArgument,
                    "%s: split.tensors.count is %" PRId64 ", but the %zu shard(s) hold %zu tensors",
                    first.source.c_str(), *first_keys->tensors, model.shards.size(), model.tensors.size());
  }
  return model;
}

}  // namespace tessera::gguf
