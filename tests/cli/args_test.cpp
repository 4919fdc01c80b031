// The pieces behind the CLI, in process: option parsing, option tables, typed values and the
// JSON text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/cli_runner.h"
#include "cli/commands.h"
#include "cli/json_text.h"
#include "tandem/run.h"

namespace tandem::cli {
namespace {

const CommandSpec& example_command() {
  static const CommandSpec spec{"example",
                                "An example",
                                "tandem example [options]",
                                "",
                                {{"--count", "N", "how many"}, {"--loud", "", "shout"}}};
  return spec;
}

ParsedArgs parse(const std::vector<std::string>& args) {
  return parse_args(example_command(), args);
}

TEST(Args, ValuesBySpaceOrEquals) {
  const ParsedArgs parsed = parse({"--count", "3", "--loud"});
  EXPECT_EQ(parsed.value("--count"), "3");
  EXPECT_TRUE(parsed.has("--loud"));
  EXPECT_FALSE(parsed.has("--help"));
  EXPECT_EQ(parse({"--count=4"}).value("--count"), "4");
  EXPECT_EQ(parse({"--count=1", "--count=2"}).value("--count"), "2");
  EXPECT_EQ(parse({"--count="}).value("--count"), "");
  EXPECT_TRUE(parse({"--help"}).has("--help"));
  EXPECT_TRUE(parse({"-h"}).has("--help"));
}

TEST(Args, MistakesAreUsageErrors) {
  EXPECT_THROW(parse({"--counts", "3"}), UsageError);
  EXPECT_THROW(parse({"--count"}), UsageError);
  EXPECT_THROW(parse({"--loud=1"}), UsageError);
  EXPECT_THROW(parse({"stray"}), UsageError);
}

TEST(Args, HelpAlignsTheOptions) {
  const std::string help = command_help(example_command());
  EXPECT_NE(help.find("Usage: tandem example [options]"), std::string::npos) << help;
  EXPECT_NE(help.find("  --count N  how many\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --loud     shout\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --help     show this help and exit\n"), std::string::npos) << help;
}

TEST(Args, TypedValues) {
  EXPECT_EQ(parse_positive_integer("--n", "12"), 12);
  EXPECT_THROW(parse_positive_integer("--n", "+12"), UsageError);
  EXPECT_THROW(parse_positive_integer("--n", " 12"), UsageError);
  EXPECT_THROW(parse_positive_integer("--n", "99999999999999999999"), UsageError);
  EXPECT_EQ(parse_unsigned_integer("--seed", "18446744073709551615"),
            std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(parse_unsigned_integer("--seed", "0"), 0u);
  EXPECT_THROW(parse_unsigned_integer("--seed", "-1"), UsageError);
  EXPECT_DOUBLE_EQ(parse_positive_number("--lr", "1e-3"), 0.001);
  EXPECT_DOUBLE_EQ(parse_positive_number("--lr", "0.5"), 0.5);
  EXPECT_THROW(parse_positive_number("--lr", "1e999"), UsageError);
  EXPECT_DOUBLE_EQ(parse_fraction("--f", "0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_fraction("--f", "0.2"), 0.2);
  EXPECT_THROW(parse_fraction("--f", "1.0"), UsageError);
  try {
    parse_positive_integer("--batch-size", "abc");
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(), "--batch-size must be a positive integer, got 'abc'");
  }
}

// Lists: split_list drops empty items; an option's list (parse_list) trims them and refuses an
// empty one, naming the option.
TEST(Args, Lists) {
  EXPECT_EQ(split_list("a,,b,"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse_list("--model", "mlp, cnn ,resnet50"),
            (std::vector<std::string>{"mlp", "cnn", "resnet50"}));
  const auto message = [](const std::string& text) {
    try {
      parse_list("--quantize-layers", text);
    } catch (const UsageError& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message("dense,,conv2d"),
            "--quantize-layers has an empty item in 'dense,,conv2d'; separate items by commas");
  EXPECT_EQ(message(""), "--quantize-layers needs at least one item");
  EXPECT_EQ(message(" "), "--quantize-layers has an empty item in ' '; separate items by commas");
}

// One declaration per option: the help line, the parse and the typed field come from it.
struct Inner {
  double rate = 0.5;
};
struct Example {
  std::int64_t count = 1;
  std::string mode = "slow";
  bool loud = false;
  Inner inner;
};

const OptionTable<Example>& example_table() {
  static const OptionTable<Example> table = [] {
    OptionTable<Example> options({
        {"--count", "N", "how many", into(&Example::count, parse_positive_integer)},
        {"--mode", "NAME", "slow or fast", into(&Example::mode, one_of({"slow", "fast"}, "mode"))},
        {"--loud", "", "shout", flag(&Example::loud)},
    });
    options
        .add(OptionTable<Inner>({{"--rate", "R", "a rate", into(&Inner::rate, parse_fraction)}}),
             &Example::inner)
        .check([](Example& example, const ParsedArgs& args) {
          if (args.has("--rate") && !example.loud) throw UsageError("--rate needs --loud");
        });
    return options;
  }();
  return table;
}

TEST(OptionTable, OneDeclarationGivesTheHelpTheParseAndTheField) {
  const CommandSpec spec{"example", "An example", "tandem example [options]", "",
                         example_table().specs()};
  const std::string help = command_help(spec);
  EXPECT_NE(help.find("  --count N    how many\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --mode NAME  slow or fast\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --loud       shout\n"), std::string::npos) << help;
  EXPECT_NE(help.find("  --rate R     a rate\n"), std::string::npos) << help;
  const auto read = [&](const std::vector<std::string>& args) {
    return example_table().read(parse_args(spec, args));
  };
  const Example defaults = read({});
  EXPECT_EQ(defaults.count, 1);
  EXPECT_EQ(defaults.mode, "slow");
  EXPECT_FALSE(defaults.loud);
  EXPECT_DOUBLE_EQ(defaults.inner.rate, 0.5);
  const Example given = read({"--count=7", "--mode", "fast", "--loud", "--rate", "0.25"});
  EXPECT_EQ(given.count, 7);
  EXPECT_EQ(given.mode, "fast");
  EXPECT_TRUE(given.loud);
  EXPECT_DOUBLE_EQ(given.inner.rate, 0.25);
  const auto error = [&](const std::vector<std::string>& args) -> std::string {
    try {
      read(args);
    } catch (const UsageError& usage) {
      return usage.what();
    }
    return "no UsageError";
  };
  EXPECT_EQ(error({"--count", "0"}), "--count must be a positive integer, got '0'");
  EXPECT_EQ(error({"--mode", "odd"}), "unknown mode 'odd' for --mode; choose slow or fast");
  EXPECT_EQ(error({"--rate", "2"}), "--rate must be a number in [0, 1), got '2'");
  EXPECT_EQ(error({"--rate", "0.1"}), "--rate needs --loud");
}

TEST(OptionTable, ChoicesDirectoriesAndOutputPaths) {
  EXPECT_EQ(parse_choice("--p", "b", {"a", "b", "c"}, "thing"), "b");
  try {
    parse_choice("--p", "d", {"a", "b", "c"}, "thing");
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(), "unknown thing 'd' for --p; choose a, b or c");
  }
  EXPECT_EQ(parse_directory("--logdir", "logs"), "logs");
  EXPECT_THROW(parse_directory("--logdir", ""), UsageError);
  EXPECT_EQ(parse_output_path("--report", "report.json"), "report.json");
  EXPECT_THROW(parse_output_path("--report", ""), UsageError);
  try {
    parse_output_path("--report", "/nonexistent/dir/report.json");
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& error) {
    EXPECT_STREQ(error.what(),
                 "--report '/nonexistent/dir/report.json': directory /nonexistent/dir does not "
                 "exist; create it or choose another path");
  }
}

TEST(Json, WritesEscapedNestedObjectsInOrder) {
  nlohmann::ordered_json outer{{"text", "a \"quoted\"\\ line\nnext\x01"},
                               {"half", 0.5},
                               {"missing", std::nan("")},
                               {"endless", std::numeric_limits<double>::infinity()},
                               {"big", 18446744073709551615u},
                               {"inner", {{"yes", true}, {"count", -3}}},
                               {"empty", nlohmann::ordered_json::object()},
                               {"names", {"a", "b"}},
                               {"not_utf8", "cpu \xff"}};
  const std::string text = json_text(outer);
  EXPECT_EQ(text,
            "{\n"
            "  \"text\": \"a \\\"quoted\\\"\\\\ line\\nnext\\u0001\",\n"
            "  \"half\": 0.5,\n"
            "  \"missing\": null,\n"
            "  \"endless\": null,\n"
            "  \"big\": 18446744073709551615,\n"
            "  \"inner\": {\n"
            "    \"yes\": true,\n"
            "    \"count\": -3\n"
            "  },\n"
            "  \"empty\": {},\n"
            "  \"names\": [\n"
            "    \"a\",\n"
            "    \"b\"\n"
            "  ],\n"
            "  \"not_utf8\": \"cpu \xef\xbf\xbd\"\n"  // U+FFFD
            "}");
  testing::JsonChecker checker(text);
  EXPECT_TRUE(checker.valid());
  EXPECT_EQ(checker.top_level().at("half"), "0.5");
}

TEST(Json, CheckerRejectsMalformedText) {
  for (const char* bad : {"{", "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "{\"a\": tru}", "\"\n\"",
                          "{} {}", "01", "1.", "{\"a\": \"\\x\"}"}) {
    EXPECT_FALSE(testing::JsonChecker(bad).valid()) << bad;
  }
  EXPECT_TRUE(testing::JsonChecker("[1, -2.5e3, \"x\", null, {\"k\": [true]}]").valid());
}

// `tandem train` is a shell over the run layer: each of its options but its own two (--config,
// --report) is a setting of run::RunConfig under the same key, with the setting's value name, and
// every setting is an option, so nothing the library can do is out of the CLI's reach.
TEST(TrainOptions, EveryOptionIsASettingOfTheRunAndEverySettingAnOption) {
  std::vector<std::string> options;
  for (const OptionSpec& option : train_spec().options) {
    options.push_back(option.name);
    const std::string key = option.name.substr(2);
    const run::Setting* setting = run::find_setting(key);
    if (key == "config" || key == "report") {
      EXPECT_EQ(setting, nullptr) << key;
      EXPECT_EQ(option.value_name, "FILE");
      continue;
    }
    ASSERT_NE(setting, nullptr) << option.name << " is no setting of run::RunConfig";
    EXPECT_EQ(option.value_name, setting->value_name) << option.name;
    EXPECT_EQ(is_train_flag(key), setting->value_name.empty()) << option.name;
  }
  for (const run::Setting& setting : run::settings()) {
    EXPECT_NE(std::find(options.begin(), options.end(), "--" + setting.key), options.end())
        << setting.key << " is a setting but no option of tandem train";
  }
  EXPECT_EQ(options.size(), run::settings().size() + 2);
}

}  // namespace
}  // namespace tandem::cli
