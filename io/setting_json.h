// A setting's value (core/setting.h) as JSON and back: integers, numbers and texts as
// themselves, an enum-valued setting as the name of its choice. options.json, config files and
// a checkpoint's config.json are written and read with these.
#pragma once

#include <string>
#include <type_traits>

#include "core/error.h"
#include "core/setting.h"
#include "io/json.h"

namespace qkgrad {

template <typename T>
Json setting_to_json(const T& value, const SettingInfo& info) {
  if constexpr (std::is_enum_v<T>) {
    return enum_text(value, info.allowed);
  } else {
    return value;
  }
}

// Reads the setting's key of `fields` into `value`, a text among its choices (if it has
// some); an error names the source and the key
// ("options.json: 'heads' must be an integer, got 2.5"; "...: 'norm' must be one of
// layer_norm, scale_norm, got \"rms\"").
template <typename T>
void setting_from_json(const JsonFields& fields, const SettingInfo& info, T& value) {
  if constexpr (std::is_same_v<T, std::string>) {
    value = fields.string(info.key);
    QKGRAD_CHECK(disallowed(value, info.allowed).empty(), fields.source_prefix(), "'", fields.path_of(info.key),
                 "' must be ", one_of_text(info.allowed), ", got ", Json(value).dump());
  } else if constexpr (std::is_enum_v<T>) {
    const std::string& text = fields.string(info.key);
    QKGRAD_CHECK(enum_from_text(text, info.allowed, value), fields.source_prefix(), "'", fields.path_of(info.key),
                 "' must be ", one_of_text(info.allowed), ", got ", Json(text).dump());
  } else if constexpr (std::is_same_v<T, double>) {
    value = fields.number(info.key);
  } else {
    value = fields.integer(info.key);
  }
}

}  // namespace qkgrad
