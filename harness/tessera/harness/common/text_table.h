// The tool's text tables (docs/scenarios.md "Tables and --wide"): columns sized to what they hold so that a table
// keeps within 80 columns by default, and the wider layout of fixed column widths that `--wide` asks for.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::harness {

// The width every table keeps to in its default layout.
inline constexpr size_t kTableWidth = 80;

// The columns a UTF-8 string takes on a terminal (one per code point).
size_t text_width(std::string_view s);

// `s` cut to `width` columns with "..." at the end when it is wider (whole code points kept).
std::string ellipsize(std::string_view s, size_t width);

// `text` wrapped to `width` columns at its spaces: the first line after `first` (which it starts with), the others
// after `indent`; a unit stays with the number before it ("64.00 GiB"), and a word wider than a line is cut where the
// line ends.
std::string wrap_lines(std::string_view first, std::string_view text, std::string_view indent,
                       size_t width = kTableWidth);

class TextTable {
 public:
  enum class Align { kLeft, kRight };
  struct Column {
    std::string header;
    Align align = Align::kRight;
    size_t wide_width = 0;  // --wide: the column's width, as printf's "%10s" (a longer cell pushes its row only)
    bool truncate = false;  // default layout: a name or path that may be cut with "..." when nothing else fits
  };

  explicit TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

  // Text before every line (header, rows and lines); without a header row the table prints its rows only.
  TextTable& indent(std::string text) {
    indent_ = std::move(text);
    return *this;
  }
  TextTable& header(bool on) {
    header_ = on;
    return *this;
  }
  // The spaces between columns in the --wide layout (the default layout uses 2, or 1 when 2 do not fit).
  TextTable& wide_gap(size_t n) {
    wide_gap_ = n;
    return *this;
  }

  // A row: one cell per column, and text after the last column (an annotation: "  (91.5% busy)", "  OVERFLOW").
  void add(std::vector<std::string> cells, std::string tail = "");
  // A line printed as it is between the rows (a heading inside the table); it does not size the columns.
  void add_line(std::string line);

  // The default layout: each column as wide as its widest cell or header, 2 spaces between columns (1 when the
  // table is wider than `max_width` so), then the truncatable columns cut to fit. `wide`: the fixed widths.
  std::string render(bool wide, size_t max_width = kTableWidth) const;

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string tail;
    bool line = false;  // add_line: cells[0] printed as it is
  };
  std::vector<Column> columns_;
  std::vector<Row> rows_;
  std::string indent_;
  bool header_ = true;
  size_t wide_gap_ = 1;
};

}  // namespace tessera::harness
