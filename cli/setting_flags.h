// A setting's flag, made from its description (core/setting.h): --KEY with - for _, its help,
// and its range (numbers) or choices (texts, enums) as the setting's table gives them.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "cli/args.h"
#include "core/setting.h"

namespace qkgrad {

// Adds the flag (named `name`, or the setting's flag name; "attn,--attention" gives two names)
// that sets `value`, which must outlive args.parse. Returns CLI11's option.
template <typename T>
CLI::Option* setting_flag(Args& args, const SettingInfo& info, T& value, std::string name = "") {
  if (name.empty()) name = flag_name(info.key);
  const Allowed& allowed = info.allowed;
  if constexpr (std::is_enum_v<T>) {
    return args.choice(name, info.help, enum_text(value, allowed),
                       [&value, allowed](const std::string& text) { enum_from_text(text, allowed, value); }, allowed.choices);
  } else if constexpr (std::is_same_v<T, std::string>) {
    return allowed.choices.empty() ? args.option(name, info.help, &value) : args.choice(name, info.help, &value, allowed.choices);
  } else if constexpr (std::is_same_v<T, double>) {
    return args.option(name, info.help, &value, allowed.min, allowed.max);
  } else {
    return args.option(name, info.help, &value, static_cast<int64_t>(allowed.min), static_cast<int64_t>(allowed.max));
  }
}

}  // namespace qkgrad
