// The tool's text tables (tessera/harness/common/text_table.h): columns as wide as their cells within 80 columns by
// default, the fixed printf-like columns of --wide, and the wrapping of long text.
#include "tessera/harness/common/text_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>

namespace tessera::harness {
namespace {

using Align = TextTable::Align;
using ::testing::HasSubstr;

size_t widest_line(const std::string& text) {
  std::istringstream in(text);
  size_t most = 0;
  for (std::string line; std::getline(in, line);) most = std::max(most, text_width(line));
  return most;
}

TEST(TextTable, ColumnsAreAsWideAsTheirCellsTwoSpacesApart) {
  TextTable t({{"device", Align::kLeft, 10}, {"weights", Align::kRight, 12}, {"peak", Align::kRight, 12}});
  t.add({"gpu0", "50.75 KiB", "82.75 KiB"});
  t.add({"cpu", "9.00 KiB", "12.19 KiB"}, "  (note)");
  EXPECT_EQ(t.render(false),
            "device    weights       peak\n"
            "gpu0    50.75 KiB  82.75 KiB\n"
            "cpu      9.00 KiB  12.19 KiB  (note)\n");
}

TEST(TextTable, WideIsPrintfWithTheFixedWidths) {
  TextTable t({{"device", Align::kLeft, 10}, {"layers", Align::kRight, 6}, {"weights", Align::kRight, 12}});
  t.add({"gpu0", "2", "50.75 KiB"}, "  (tail)");
  t.add({"a-very-long-device-name", "12", "1.00 GiB"});
  char expected[256];
  std::snprintf(expected, sizeof expected, "%-10s %6s %12s\n%-10s %6s %12s  (tail)\n%-10s %6s %12s\n", "device",
                "layers", "weights", "gpu0", "2", "50.75 KiB", "a-very-long-device-name", "12", "1.00 GiB");
  EXPECT_EQ(t.render(true), expected);
}

TEST(TextTable, OneSpaceApartWhenTwoAreWiderThanTheLimit) {
  std::vector<TextTable::Column> columns;
  for (int c = 0; c < 7; ++c) columns.push_back({"c" + std::to_string(c), Align::kRight, 12});
  TextTable t(columns);
  t.add(std::vector<std::string>(7, "1023.99 MiB"));  // 7 x 11 + 6 x 2 = 89 columns; with 1 space: 83
  EXPECT_EQ(widest_line(t.render(false, 90)), 89u);
  EXPECT_EQ(widest_line(t.render(false, 85)), 83u);
}

TEST(TextTable, NamesAreCutWithAnEllipsisOnlyWhenNothingElseFits) {
  TextTable t({{"device", Align::kLeft, 10, true}, {"size", Align::kRight, 12}});
  t.add({"a-device-with-a-name-of-forty-characters", "1.00 GiB"});
  const std::string narrow = t.render(false, 30);
  EXPECT_THAT(narrow, HasSubstr("a-device-with-a-na... 1.00 GiB\n"));
  EXPECT_LE(widest_line(narrow), 30u);
  EXPECT_THAT(t.render(false), HasSubstr("a-device-with-a-name-of-forty-characters  1.00 GiB\n"));
  EXPECT_THAT(t.render(true), HasSubstr("a-device-with-a-name-of-forty-characters     1.00 GiB\n"));
}

TEST(TextTable, LinesBetweenRowsAndNoHeader) {
  TextTable t({{"name", Align::kLeft, 8}, {"size", Align::kRight, 0}});
  t.header(false).indent("    ");
  t.add_line("  layer 0: 2 tensors");
  t.add({"blk.0.a", "1.00 KiB"});
  t.add({"blk.0.bb", "512 B"});
  EXPECT_EQ(t.render(false), "  layer 0: 2 tensors\n    blk.0.a   1.00 KiB\n    blk.0.bb     512 B\n");
}

TEST(TextTable, WrapLinesKeepsEveryWordWithinTheWidth) {
  const std::string text =
      "weights or caches on another backend (1.wgt, 1.dst): the layer placement (-ngl, -ts, -ot, ...)";
  const std::string out = wrap_lines("     1  weights         ", text, std::string(24, ' '));
  EXPECT_EQ(out,
            "     1  weights         weights or caches on another backend (1.wgt, 1.dst): the\n"
            "                        layer placement (-ngl, -ts, -ot, ...)\n");
  EXPECT_EQ(wrap_lines("  ", "short", "    "), "  short\n");
  // A unit stays with its number.
  EXPECT_EQ(wrap_lines("", "peak 37.59 GiB of 64.00 GiB", "  ", 22), "peak 37.59 GiB of\n  64.00 GiB\n");
  EXPECT_EQ(wrap_lines("", "(24 GB, 936 GB/s) each", "", 12), "(24 GB,\n936 GB/s)\neach\n");
  // A word longer than a line is cut where the line ends.
  const std::string url = wrap_lines("x ", std::string(30, 'a'), "  ", 12);
  EXPECT_EQ(url, "x aaaaaaaaaa\n  aaaaaaaaaa\n  aaaaaaaaaa\n");
}

TEST(TextTable, WidthsCountCodePoints) {
  EXPECT_EQ(text_width("µs"), 2u);
  EXPECT_EQ(ellipsize("µµµµµµ", 5), "µµ...");
  EXPECT_EQ(ellipsize("short", 10), "short");
}

}  // namespace
}  // namespace tessera::harness
