// Core's text helpers: UTF-8 validity (class folder names are refused before training when
// they are not), bytes shown printable in messages, "did you mean", and how deep a TOML text
// nests (run, sweep and price files are refused past 32 levels before toml++'s recursive parser
// sees them).
#include <gtest/gtest.h>

#include "core/text.h"
#include "core/toml_depth.h"

namespace tandem {
namespace {

TEST(Text, Utf8IsCheckedByteByByte) {
  EXPECT_TRUE(is_utf8(""));
  EXPECT_TRUE(is_utf8("ankle boot"));
  EXPECT_TRUE(is_utf8("caf\xc3\xa9"));        // é
  EXPECT_TRUE(is_utf8("\xe2\x82\xac"));       // €
  EXPECT_TRUE(is_utf8("\xf0\x9f\x90\x88"));   // 🐈
  EXPECT_FALSE(is_utf8("caf\xe9"));           // Latin-1 é
  EXPECT_FALSE(is_utf8("\xc3"));              // cut short
  EXPECT_FALSE(is_utf8("\x80"));              // a continuation byte alone
  EXPECT_FALSE(is_utf8("\xc0\xaf"));          // an overlong '/'
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_EQ(printable("bad\xff name\n"), "bad\\xFF name\\x0A");
}

TEST(Text, DidYouMeanSuggestsWithinTwoEdits) {
  EXPECT_EQ(did_you_mean("batch-sise", {"batch-size", "epochs"}), " (did you mean 'batch-size'?)");
  EXPECT_EQ(did_you_mean("learning-rate", {"batch-size", "lr"}), "");
}

TEST(TomlDepth, CountsKeysHeadersArraysAndInlineTablesButNotStringsOrComments) {
  EXPECT_FALSE(toml_too_deep("a = 1\n[t]\nb.c = [1.5, 2.5, {x.y = 2}]\n"));
  std::string key = "x = 1\n";
  for (int part = 0; part < 40; ++part)
    key += part == 0 ? "a" : ".a";
  key += " = 1\n";
  const std::optional<TomlDepth> deep = toml_too_deep(key);
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->line, 2);
  EXPECT_EQ(deep->depth, 33);
  std::string header = "[a";
  for (int part = 1; part < 40; ++part)
    header += ".a";
  EXPECT_TRUE(toml_too_deep(header + "]\nx = 1\n"));
  EXPECT_TRUE(toml_too_deep("v = " + std::string(33, '[') + std::string(33, ']') + "\n"));
  EXPECT_FALSE(toml_too_deep("v = " + std::string(32, '[') + std::string(32, ']') + "\n"));
  std::string inline_tables = "v = ";
  for (int level = 0; level < 40; ++level)
    inline_tables += "{a = ";
  EXPECT_TRUE(toml_too_deep(inline_tables));
  // Dots and brackets in strings, multi-line strings and comments are text.
  const std::string dots(100, '.');
  const std::string brackets(100, '[');
  EXPECT_FALSE(toml_too_deep("s = \"" + dots + brackets + "\"\n# " + dots + brackets + "\n"));
  EXPECT_FALSE(
      toml_too_deep("s = '''\n" + dots + "\n" + brackets + "\n'''\nt = \"a\\\"" + dots + "\"\n"));
  EXPECT_FALSE(toml_too_deep("\"" + dots + "\" = 1\n"));  // a quoted key is one part
}

}  // namespace
}  // namespace tandem
