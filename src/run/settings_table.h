#pragma once
// The settings table behind run::settings() (src/run/settings.cpp): each setting with how its
// field is read from text and written back.
#include <functional>
#include <string>
#include <vector>

#include "tandem/run.h"

namespace tandem::run {

struct Entry {
  Setting setting;
  // Sets the field from `text`; `name` is the setting as the caller spells it, for messages.
  std::function<void(RunConfig&, const std::string& name, const std::string& text)> read;
  // The field's canonical text.
  std::function<std::string(const RunConfig&)> write;
};

const std::vector<Entry>& entries();
// The entry of `key`; throws ConfigError for an unknown key.
const Entry& entry_of(const std::string& key);
std::vector<std::string> setting_keys();
// Whether the field of `key` differs from RunConfig{}'s.
bool is_changed(const RunConfig& config, const std::string& key);

}  // namespace tandem::run
