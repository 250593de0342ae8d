// dot_escape (tessera/harness/session/session.h): what Session::dot writes for every name inside a Graphviz
// double-quoted string. Expected strings written by hand from the DOT language's rules
// (graphviz.org/doc/info/lang.html: in a quoted string \" is a quote; Graphviz reads a backslash as the start of its
// escapes \n \l \r \N \G \E \T \H, so a literal one is \\; the input is UTF-8).
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/session/session.h"

using tessera::harness::dot_escape;

TEST(DotEscape, PlainNamesAreUnchanged) {
  EXPECT_EQ(dot_escape("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
  EXPECT_EQ(dot_escape("Qcur-0 (reshaped)"), "Qcur-0 (reshaped)");
  EXPECT_EQ(dot_escape(""), "");
}

TEST(DotEscape, QuotesBackslashesAndNewlines) {
  EXPECT_EQ(dot_escape("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(dot_escape("a\\b"), "a\\\\b");
  EXPECT_EQ(dot_escape("trailing\\"), "trailing\\\\");  // would otherwise escape the closing quote
  EXPECT_EQ(dot_escape("\\N"), "\\\\N");                // not Graphviz's node-name escape
  EXPECT_EQ(dot_escape("two\nlines"), "two\\nlines");
}

TEST(DotEscape, ControlCharactersAndBrokenUtf8) {
  EXPECT_EQ(dot_escape(std::string("a\tb\x1b", 4)), "a\\\\x09b\\\\x1b");  // shown as \x09 and \x1b
  EXPECT_EQ(dot_escape("caf\xC3\xA9"), "caf\xC3\xA9");                    // valid UTF-8 kept
  EXPECT_EQ(dot_escape("bad \xFF end"), "bad \xEF\xBF\xBD end");          // U+FFFD
  EXPECT_EQ(dot_escape("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");  // a sequence cut short by a name's limit
}
