// The tool's text tables (tessera/harness/common/text_table.h).
#include "tessera/harness/common/text_table.h"

#include <algorithm>

namespace tessera::harness {

size_t text_width(std::string_view s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) == 0x80 ? 0 : 1;
  return n;
}

namespace {

// The bytes of the first `cols` code points of `s`.
size_t prefix_bytes(std::string_view s, size_t cols) {
  size_t i = 0, n = 0;
  for (; i < s.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    if (starts && n == cols) break;
    n += starts ? 1 : 0;
  }
  return i;
}

}  // namespace

std::string ellipsize(std::string_view s, size_t width) {
  if (text_width(s) <= width) return std::string(s);
  if (width <= 3) return std::string(width, '.');
  std::string out;
  size_t cols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    if (starts && cols == width - 3) break;
    cols += starts ? 1 : 0;
    out += s[i];
  }
  return out + "...";
}

namespace {

// The words of `text`, a unit kept with the number before it ("64.00 GiB", "936 GB/s", "0.5 %"): a line never ends
// between them.
std::vector<std::string> words_of(std::string_view text) {
  static const char* const kUnits[] = {"B", "KiB",  "MiB",  "GiB",  "TiB",   "KB",    "kB", "MB", "GB", "TB",
                                       "%", "MB/s", "GB/s", "TB/s", "GiB/s", "TiB/s", "ns", "us", "ms", "s"};
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size()) break;
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string word(text.substr(i, end - i));
    std::string bare = word;  // without the punctuation after it: "GiB," "GiB)"
    while (!bare.empty() && std::string_view(",;:.)").find(bare.back()) != std::string_view::npos) bare.pop_back();
    bool unit = false;
    for (const char* u : kUnits) unit = unit || bare == u;
    const bool after_number = !words.empty() && words.back().back() >= '0' && words.back().back() <= '9';
    if (unit && after_number) {
      words.back() += " " + word;
    } else {
      words.push_back(word);
    }
    i = end;
  }
  return words;
}

}  // namespace

std::string wrap_lines(std::string_view first, std::string_view text, std::string_view indent, size_t width) {
  std::string out, line(first);
  bool bare = true;  // no word on the line yet
  for (const std::string& w : words_of(text)) {
    std::string_view word = w;
    if (!bare && text_width(line) + 1 + text_width(word) > width) {
      out += line + "\n";
      line = indent;
      bare = true;
    }
    // A word wider than a whole line (a URL, a long name) is cut where the line ends.
    while (bare && text_width(line) + text_width(word) > width && text_width(line) < width) {
      const size_t cut = prefix_bytes(word, width - text_width(line));
      out += line + std::string(word.substr(0, cut)) + "\n";
      word.remove_prefix(cut);
      line = indent;
    }
    line += (bare ? "" : " ") + std::string(word);
    bare = false;
  }
  return out + line + "\n";
}

void TextTable::add(std::vector<std::string> cells, std::string tail) {
  cells.resize(columns_.size());
  rows_.push_back({std::move(cells), std::move(tail), false});
}

void TextTable::add_line(std::string line) { rows_.push_back({{std::move(line)}, "", true}); }

namespace {

std::string pad(const std::string& cell, size_t width, TextTable::Align align) {
  const size_t w = text_width(cell);
  if (w >= width) return cell;
  const std::string fill(width - w, ' ');
  return align == TextTable::Align::kLeft ? cell + fill : fill + cell;
}

void rtrim(std::string* s) {
  while (!s->empty() && s->back() == ' ') s->pop_back();
}

}  // namespace

std::string TextTable::render(bool wide, size_t max_width) const {
  const size_t n = columns_.size();
  std::vector<size_t> width(n, 0);
  size_t gap = wide_gap_;
  if (wide) {
    for (size_t c = 0; c < n; ++c) width[c] = columns_[c].wide_width;
  } else {
    size_t tail = 0;
    for (size_t c = 0; c < n; ++c) width[c] = header_ ? text_width(columns_[c].header) : 0;
    for (const Row& r : rows_) {
      if (r.line) continue;
      for (size_t c = 0; c < n; ++c) width[c] = std::max(width[c], text_width(r.cells[c]));
      tail = std::max(tail, text_width(r.tail));
    }
    auto total = [&](size_t g) {
      size_t t = text_width(indent_) + tail + (n > 0 ? g * (n - 1) : 0);
      for (size_t w : width) t += w;
      return t;
    };
    gap = total(2) <= max_width ? 2 : 1;
    // Still too wide: the names and paths that may be cut give up what is over, the widest first.
    for (size_t over = total(gap) > max_width ? total(gap) - max_width : 0; over > 0;) {
      size_t pick = n;
      for (size_t c = 0; c < n; ++c) {
        const size_t floor = std::max<size_t>(header_ ? text_width(columns_[c].header) : 0, 6);
        if (columns_[c].truncate && width[c] > floor && (pick == n || width[c] > width[pick])) pick = c;
      }
      if (pick == n) break;
      const size_t floor = std::max<size_t>(header_ ? text_width(columns_[pick].header) : 0, 6);
      const size_t cut = std::min(over, width[pick] - floor);
      width[pick] -= cut;
      over -= cut;
    }
  }
  auto line = [&](const std::vector<std::string>& cells, const std::string& tail) {
    std::string s = indent_;
    for (size_t c = 0; c < n; ++c) {
      if (c > 0) s += std::string(gap, ' ');
      const std::string cell = wide || !columns_[c].truncate ? cells[c] : ellipsize(cells[c], width[c]);
      s += pad(cell, width[c], columns_[c].align);
    }
    s += tail;
    if (!wide) rtrim(&s);
    return s + "\n";
  };
  std::string out;
  if (header_) {
    std::vector<std::string> heads;
    for (const Column& c : columns_) heads.push_back(c.header);
    out += line(heads, "");
  }
  for (const Row& r : rows_) out += r.line ? r.cells[0] + "\n" : line(r.cells, r.tail);
  return out;
}

}  // namespace tessera::harness
