// The price table (TOML read by toml++, shipped defaults with sources and dates) and the cost
// arithmetic that turns step times into money.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "core/files.h"
#include "core/text.h"
#include "core/toml_depth.h"
#include "tandem/bench.h"
#include "tandem/error.h"

namespace tandem::bench {
namespace {

constexpr const char* kDefaultPrices =
    R"toml(# Tandem's default prices for the cost figures of `tandem bench`: on-demand list prices in US
# regions, per device-hour (per vCPU-hour for the CPU, times the threads the run used), as the
# source page listed them at the date given. Prices change and differ by region and discount:
# write this file out (tandem bench --print-prices > prices.toml), edit it and pass
# --prices prices.toml, or give one price for every device with --price-per-hour.
currency = "USD"

[device.cpu]
match = "cpu"
per_core_hour = 0.031611
source = "Google Cloud N2 vCPU (memory extra), us-central1, https://cloud.google.com/compute/vm-instance-pricing"
date = "2024-06"

[device.t4]
match = "T4"
per_hour = 0.35
source = "Google Cloud GPU pricing, NVIDIA T4, us-central1, https://cloud.google.com/compute/gpus-pricing"
date = "2024-06"

[device.v100]
match = "V100"
per_hour = 2.48
source = "Google Cloud GPU pricing, NVIDIA V100, us-central1, https://cloud.google.com/compute/gpus-pricing"
date = "2024-06"

[device.a100]
match = "A100"
per_hour = 2.933908
source = "Google Cloud GPU pricing, NVIDIA A100 40GB, us-central1, https://cloud.google.com/compute/gpus-pricing"
date = "2024-06"

[device.h100]
match = "H100"
per_hour = 11.06
source = "Google Cloud a3-highgpu-8g (8 x H100 80GB, VM included) / 8, us-central1, https://cloud.google.com/compute/vm-instance-pricing"
date = "2024-06"

[device.h200]
match = "H200"
per_hour = 10.60
source = "Google Cloud a3-ultragpu-8g (8 x H200 141GB, VM included) / 8, us-central1, https://cloud.google.com/compute/vm-instance-pricing"
date = "2025-01"

[device.tpu_v3]
match = "TPU v3"
per_hour = 2.00
source = "Cloud TPU pricing, v3-8 device ($8.00/h) / 4 chips, us-central1, https://cloud.google.com/tpu/pricing"
date = "2024-06"

[device.tpu_v4]
match = "TPU v4"
per_hour = 3.22
source = "Cloud TPU pricing, v4 per chip-hour, us-central2, https://cloud.google.com/tpu/pricing"
date = "2024-06"

[device.tpu_v5e]
match = "TPU v5e"
per_hour = 1.20
source = "Cloud TPU pricing, v5e per chip-hour, us-central1, https://cloud.google.com/tpu/pricing"
date = "2024-06"

[device.tpu_v5p]
match = "TPU v5p"
per_hour = 4.20
source = "Cloud TPU pricing, v5p per chip-hour, us-east5, https://cloud.google.com/tpu/pricing"
date = "2024-06"

[device.tpu_v6e]
match = "TPU v6e"
per_hour = 2.70
source = "Cloud TPU pricing, v6e (Trillium) per chip-hour, us-east1, https://cloud.google.com/tpu/pricing"
date = "2025-01"
)toml";

// The largest price table `load_prices` reads: a table of a few dozen devices is a few KiB.
constexpr std::uint64_t kMaxPriceFileBytes = std::uint64_t{1} << 20;  // 1 MiB

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

// Line `number` (from 1) of `text`, without its newline; empty past the end.
std::string_view line_of(std::string_view text, std::size_t number) {
  for (std::size_t line = 1; line < number; ++line) {
    const std::size_t newline = text.find('\n');
    if (newline == std::string_view::npos) return {};
    text.remove_prefix(newline + 1);
  }
  return text.substr(0, text.find('\n'));
}

int line_of(const toml::source_region& source) {
  return static_cast<int>(source.begin.line);
}

// A table's entries in the order the file has them (toml::table orders them by key).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(
    const toml::table& table) {
  std::vector<std::pair<const toml::key*, const toml::node*>> entries;
  for (const auto& [key, node] : table)
    entries.emplace_back(&key, &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.first->source().begin < b.first->source().begin;
  });
  return entries;
}

// Turns a TOML document into a PriceTable, naming `origin` and the line in every error.
class PriceReader {
 public:
  explicit PriceReader(std::string origin) : origin_(std::move(origin)) {}

  PriceTable read(std::string_view text) {
    if (const std::optional<TomlDepth> deep = toml_too_deep(text)) {
      fail(deep->line,
           "bad TOML (nested " + std::to_string(deep->depth) + " levels deep, more than " +
               std::to_string(kMaxTomlDepth) + ")",
           "a price table's keys nest a few levels at most ([device.\"name\"])");
    }
    toml::table document;
    try {
      document = toml::parse(text, std::string_view(origin_));
    } catch (const toml::parse_error& error) {
      syntax_error(text, error);
    }
    PriceTable table;
    table.origin = origin_;
    for (const auto& [key, node] : in_file_order(document)) {
      if (key->str() == "currency") {
        table.currency = expect_string(*key, *node);
      } else if (key->str() == "device") {
        read_devices(*key, *node, table.prices);
      } else if (const toml::table* unknown = node->as_table()) {
        // [gpu.a] makes a table gpu holding a; name the header as written.
        std::string name(key->str());
        int line = line_of(key->source());
        if (const auto entries = in_file_order(*unknown); !entries.empty()) {
          name += "." + std::string(entries.front().first->str());
          line = line_of(entries.front().first->source());
        }
        fail(line, "unknown table [" + name + "]",
             "prices go in [device.<name>] tables, e.g. [device.a100]");
      } else {
        fail(line_of(key->source()), "unknown top-level key '" + std::string(key->str()) + "'",
             "only currency = \"USD\" goes above the [device.<name>] tables");
      }
    }
    if (table.prices.empty()) {
      throw InvalidArgument(origin_ +
                            ": no [device.<name>] table; add one per device, e.g. [device.a100] "
                            "with match = \"A100\", per_hour = 2.93, source = \"...\" and date = "
                            "\"YYYY-MM\"");
    }
    return table;
  }

 private:
  [[noreturn]] void fail(int line, const std::string& problem, const std::string& fix) const {
    throw InvalidArgument(origin_ + ":" + std::to_string(line) + ": " + problem + "; " + fix);
  }

  // toml++ says what it expected and where ("Error while parsing floating-point: expected
  // decimal digit, saw 'x'" at a line and column); the message names the part of the line at
  // fault as a price table's author sees it, keeps toml++'s reason and gives the fix.
  [[noreturn]] void syntax_error(std::string_view text, const toml::parse_error& error) const {
    const int line = line_of(error.source());
    const std::string_view raw = line_of(text, error.source().begin.line);
    const std::size_t column = error.source().begin.column;  // from 1
    std::string reason(error.description());
    if (const std::size_t colon = reason.find(": ");
        reason.starts_with("Error while parsing ") && colon != std::string::npos) {
      reason = reason.substr(colon + 2);
    }
    const std::string why = " (" + reason + ", column " + std::to_string(column) + ")";
    const std::string_view written = trim(raw);
    if (written.empty()) fail(line, "bad TOML" + why, "see https://toml.io for the syntax");
    if (written.front() == '[') {
      const std::string header(trim(written.substr(0, written.find(']') + 1)));
      if (reason.find("redefine existing table") != std::string::npos) {
        fail(line, header + " appears twice", "merge the two tables");
      }
      fail(line, "bad table header '" + std::string(written) + "'" + why, "write [device.<name>]");
    }
    const std::size_t equals = raw.find('=');
    if (equals == std::string_view::npos) {
      fail(line,
           "expected 'key = value' or a [device.<name>] header, got '" + std::string(written) +
               "'" + why,
           "write e.g. per_hour = 2.93");
    }
    const std::string key(trim(raw.substr(0, equals)));
    if (reason.find("redefine existing") != std::string::npos) {
      fail(line, "'" + key + "' is set twice" + why, "keep one");
    }
    if (column <= equals) {
      fail(line, "bad key '" + key + "'" + why,
           "keys are letters, digits, '_' and '-', or in double quotes");
    }
    if (reason.starts_with("expected a comment or whitespace") && column <= raw.size()) {
      fail(line, "unexpected '" + std::string(trim(raw.substr(column - 1))) + "' after the value",
           "one value per line; put comments after a #");
    }
    std::string_view value = trim(raw.substr(equals + 1));
    if (!value.empty() && (value.front() == '"' || value.front() == '\'')) {
      if (value.find(value.front(), 1) == std::string_view::npos) {
        fail(line, "unterminated string (column " + std::to_string(column) + ")",
             std::string("close it with ") + value.front());
      }
      fail(line, "cannot read the string " + std::string(value) + why,
           "use \\\", \\\\, \\n or \\t in \"...\", or a 'literal string'");
    }
    value = trim(value.substr(0, value.find('#')));
    fail(line, "cannot read the value '" + std::string(value) + "'" + why,
         "write a string in double quotes, a number such as 2.93, true or false");
  }

  void read_devices(const toml::key& key, const toml::node& node, std::vector<Price>& prices) {
    const toml::table* devices = node.as_table();
    if (devices == nullptr) {
      fail(line_of(key.source()), "device must hold [device.<name>] tables",
           "write a [device.<name>] header per device, e.g. [device.a100]");
    }
    for (const auto& [name, entry] : in_file_order(*devices))
      prices.push_back(read_device(*name, *entry));
  }

  Price read_device(const toml::key& name, const toml::node& node) {
    Price price;
    price.key = name.str();
    const std::string header = "[device." + price.key + "]";
    const toml::table* entry = node.as_table();
    if (entry == nullptr) {
      fail(line_of(name.source()), "'" + price.key + "' under [device] is not a table",
           "give each device a table of its own: " + header + " and its keys below it");
    }
    if (price.key.empty())
      fail(line_of(name.source()), "empty device name in [device.\"\"]", "name it");
    bool priced = false;
    for (const auto& [key_node, value] : in_file_order(*entry)) {
      const std::string key(key_node->str());
      if (key == "match") {
        price.match = expect_string(*key_node, *value);
      } else if (key == "per_hour" || key == "per_core_hour") {
        if (priced) {
          fail(line_of(key_node->source()), header + " has both per_hour and per_core_hour",
               "keep one");
        }
        const std::optional<double> number =
            value->is_number() ? value->value<double>() : std::nullopt;
        if (!number || !(*number >= 0.0) || !std::isfinite(*number)) {
          fail(line_of(value->source()), key + " must be a non-negative number",
               "write e.g. " + key + " = 2.93");
        }
        price.per_hour = *number;
        price.per_core = key == "per_core_hour";
        priced = true;
      } else if (key == "source") {
        price.source = expect_string(*key_node, *value);
      } else if (key == "date") {
        price.date = expect_string(*key_node, *value);
      } else {
        fail(line_of(key_node->source()), "unknown key '" + key + "' in " + header,
             "the keys are match, per_hour (or per_core_hour), source and date");
      }
    }
    const int line = line_of(entry->source());
    if (!priced) {
      fail(line, header + " has no price",
           "add per_hour = <price per device-hour> (or per_core_hour for CPUs)");
    }
    if (price.source.empty() || price.date.empty()) {
      fail(line, header + " needs source and date",
           "say where the price comes from and when, e.g. source = \"https://...\" and date = "
           "\"2024-06\"");
    }
    if (price.match.empty()) price.match = price.key;
    return price;
  }

  std::string expect_string(const toml::key& key, const toml::node& value) const {
    if (const toml::value<std::string>* text = value.as_string()) return text->get();
    fail(line_of(value.source()), std::string(key.str()) + " must be a string",
         "put it in double quotes: " + std::string(key.str()) + " = \"...\"");
  }

  std::string origin_;
};

}  // namespace

const char* default_prices_toml() {
  return kDefaultPrices;
}

PriceTable default_prices() {
  static const PriceTable table = parse_prices(kDefaultPrices, "built-in defaults");
  return table;
}

PriceTable parse_prices(std::string_view text, const std::string& origin) {
  return PriceReader(origin).read(text);
}

PriceTable load_prices(const std::string& path) {
  // core's reader refuses a FIFO or a device such as /dev/zero before opening it, and a file past
  // a price table's size bound, naming the path and what is there.
  std::vector<std::uint8_t> bytes;
  try {
    bytes = read_whole_file(path, {.max_bytes = kMaxPriceFileBytes});
  } catch (const IoError& error) {
    throw IoError("the price table " + std::string(error.what()) +
                  "; pass a TOML file (tandem bench --print-prices writes the defaults to start "
                  "from)");
  }
  return parse_prices(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                      path);
}

std::optional<PriceTable::Quote> PriceTable::quote(std::string_view device_name,
                                                   int threads) const {
  if (flat_per_hour) return Quote{*flat_per_hour, "--price-per-hour"};
  const std::string name = lower(device_name);
  for (const Price& price : prices) {
    if (name.find(lower(price.match)) == std::string::npos) continue;
    const double per_hour = price.per_core ? price.per_hour * std::max(threads, 1) : price.per_hour;
    return Quote{
        per_hour,
        price.key + ": " + price.source + " (" + price.date + ")" +
            (price.per_core ? ", x" + std::to_string(std::max(threads, 1)) + " cores" : "")};
  }
  return std::nullopt;
}

Cost cost_of(double price_per_hour, double step_seconds, std::int64_t batch,
             std::int64_t epoch_examples) {
  if (batch <= 0) throw InvalidArgument("bench::cost_of: batch must be positive");
  const double per_step = price_per_hour / 3600.0 * step_seconds;
  Cost cost;
  cost.per_1000_steps = 1000.0 * per_step;
  cost.per_million_samples = 1e6 / static_cast<double>(batch) * per_step;
  const auto epoch_steps = (epoch_examples + batch - 1) / batch;
  cost.per_epoch = static_cast<double>(epoch_steps) * per_step;
  return cost;
}

}  // namespace tandem::bench
