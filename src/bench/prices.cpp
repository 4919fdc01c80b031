// The price table (a small TOML subset, shipped defaults with sources and dates) and the cost
// arithmetic that turns step times into money.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <variant>

#include "core/text.h"
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

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  return text;
}

bool is_bare_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

using Value = std::variant<std::string, double, bool>;

// Reads one TOML document line at a time, naming the origin and line in every error.
class PriceParser {
 public:
  PriceParser(std::string_view text, std::string origin) : text_(text), origin_(std::move(origin)) {
    table_.origin = origin_;
  }

  PriceTable parse() {
    std::istringstream lines{std::string(text_)};
    std::string line;
    while (std::getline(lines, line)) {
      ++line_number_;
      parse_line(line);
    }
    finish_device();
    if (table_.prices.empty()) {
      fail("no [device.<name>] table",
           "add one per device, e.g. [device.a100] with match = "
           "\"A100\", per_hour = 2.93, source = \"...\" and date = "
           "\"YYYY-MM\"");
    }
    return table_;
  }

 private:
  [[noreturn]] void fail(const std::string& problem, const std::string& fix) const {
    throw InvalidArgument(origin_ + ":" + std::to_string(line_number_) + ": " + problem + "; " +
                          fix);
  }

  void parse_line(std::string_view line) {
    line = trim(line);
    if (line.empty() || line.front() == '#') return;
    if (line.front() == '[') return parse_header(line);
    const std::size_t equals = line.find('=');
    if (equals == std::string_view::npos) {
      fail("expected 'key = value' or a [device.<name>] header, got '" + std::string(line) + "'",
           "write e.g. per_hour = 2.93");
    }
    const std::string key(trim(line.substr(0, equals)));
    if (key.empty() || !std::all_of(key.begin(), key.end(), is_bare_key_char)) {
      fail("bad key '" + key + "'", "keys are letters, digits, '_' and '-'");
    }
    const Value value = parse_value(trim(line.substr(equals + 1)));
    if (!in_device_) return set_top_level(key, value);
    if (!seen_keys_.insert(key).second) {
      fail("'" + key + "' is set twice in [device." + device_.key + "]", "keep one");
    }
    set_device_key(key, value);
  }

  void parse_header(std::string_view line) {
    const std::size_t hash = line.find('#');
    std::string_view header = trim(line.substr(0, hash));
    if (header.size() < 3 || header.back() != ']' || header[1] == '[') {
      fail("bad table header '" + std::string(line) + "'", "write [device.<name>]");
    }
    header = trim(header.substr(1, header.size() - 2));
    if (!header.starts_with("device.")) {
      fail("unknown table [" + std::string(header) + "]",
           "prices go in [device.<name>] tables, e.g. [device.a100]");
    }
    std::string name(trim(header.substr(7)));
    if (name.size() >= 2 && name.front() == '"' && name.back() == '"')
      name = name.substr(1, name.size() - 2);
    if (name.empty()) fail("empty device name in [" + std::string(header) + "]", "name it");
    finish_device();
    for (const Price& price : table_.prices) {
      if (price.key == name) fail("[device." + name + "] appears twice", "merge the two tables");
    }
    in_device_ = true;
    device_ = Price{};
    device_.key = name;
    device_line_ = line_number_;
    seen_keys_.clear();
  }

  void set_top_level(const std::string& key, const Value& value) {
    if (key != "currency") {
      fail("unknown top-level key '" + key + "'",
           "only currency = \"USD\" goes above the [device.<name>] tables");
    }
    table_.currency = expect_string(key, value);
  }

  void set_device_key(const std::string& key, const Value& value) {
    if (key == "match") {
      device_.match = expect_string(key, value);
    } else if (key == "per_hour" || key == "per_core_hour") {
      if (seen_keys_.contains("per_hour") && seen_keys_.contains("per_core_hour")) {
        fail("[device." + device_.key + "] has both per_hour and per_core_hour", "keep one");
      }
      const double* number = std::get_if<double>(&value);
      if (number == nullptr || !(*number >= 0.0) || !std::isfinite(*number)) {
        fail(key + " must be a non-negative number", "write e.g. " + key + " = 2.93");
      }
      device_.per_hour = *number;
      device_.per_core = key == "per_core_hour";
    } else if (key == "source") {
      device_.source = expect_string(key, value);
    } else if (key == "date") {
      device_.date = expect_string(key, value);
    } else {
      fail("unknown key '" + key + "' in [device." + device_.key + "]",
           "the keys are match, per_hour (or per_core_hour), source and date");
    }
  }

  void finish_device() {
    if (!in_device_) return;
    in_device_ = false;
    const int here = line_number_;
    line_number_ = device_line_;
    if (!seen_keys_.contains("per_hour") && !seen_keys_.contains("per_core_hour")) {
      fail("[device." + device_.key + "] has no price",
           "add per_hour = <price per device-hour> (or per_core_hour for CPUs)");
    }
    if (device_.source.empty() || device_.date.empty()) {
      fail("[device." + device_.key + "] needs source and date",
           "say where the price comes from and when, e.g. source = \"https://...\" and date = "
           "\"2024-06\"");
    }
    if (device_.match.empty()) device_.match = device_.key;
    line_number_ = here;
    table_.prices.push_back(device_);
  }

  std::string expect_string(const std::string& key, const Value& value) const {
    if (const std::string* text = std::get_if<std::string>(&value)) return *text;
    fail(key + " must be a string", "put it in double quotes: " + key + " = \"...\"");
  }

  Value parse_value(std::string_view text) {
    if (text.empty()) fail("missing value", "write a string in quotes, a number, true or false");
    if (text.front() == '"' || text.front() == '\'') return parse_string(text);
    std::string_view token = text;
    if (const std::size_t hash = token.find('#'); hash != std::string_view::npos)
      token = trim(token.substr(0, hash));
    if (token == "true") return true;
    if (token == "false") return false;
    std::string digits;
    for (const char c : token) {
      if (c != '_') digits += c;
    }
    try {
      std::size_t used = 0;
      const double number = std::stod(digits, &used);
      if (used == digits.size() && !digits.empty() &&
          (std::isdigit(static_cast<unsigned char>(digits.front())) || digits.front() == '-' ||
           digits.front() == '+')) {
        return number;
      }
    } catch (const std::exception&) {
    }
    fail("cannot read the value '" + std::string(token) + "'",
         "write a string in double quotes, a number such as 2.93, true or false");
  }

  Value parse_string(std::string_view text) {
    const char quote = text.front();
    std::string value;
    std::size_t i = 1;
    for (; i < text.size() && text[i] != quote; ++i) {
      if (text[i] != '\\' || quote == '\'') {
        value += text[i];
        continue;
      }
      if (++i == text.size()) break;
      switch (text[i]) {
        case '"':
          value += '"';
          break;
        case '\\':
          value += '\\';
          break;
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        default:
          fail(std::string("unsupported escape '\\") + text[i] + "'",
               "use \\\", \\\\, \\n or \\t, or a 'literal string'");
      }
    }
    if (i >= text.size()) fail("unterminated string", std::string("close it with ") + quote);
    const std::string_view rest = trim(text.substr(i + 1));
    if (!rest.empty() && rest.front() != '#') {
      fail("unexpected '" + std::string(rest) + "' after the string", "put comments after a #");
    }
    return value;
  }

  std::string_view text_;
  std::string origin_;
  PriceTable table_;
  int line_number_ = 0;
  bool in_device_ = false;
  Price device_;
  int device_line_ = 0;
  std::set<std::string> seen_keys_;
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
  return PriceParser(text, origin).parse();
}

PriceTable load_prices(const std::string& path) {
  std::ifstream file(path);
  if (!file) {
    throw IoError("cannot read the price table " + path +
                  "; check the path (tandem bench --print-prices writes the defaults to start "
                  "from)");
  }
  std::ostringstream text;
  text << file.rdbuf();
  return parse_prices(text.str(), path);
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
