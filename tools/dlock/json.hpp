// JSON string literals for `dlock status --json`.
#pragma once

#include <string>
#include <string_view>

namespace dlock::cli {

// `text` as a JSON string literal, quotes included: '"' and '\' escaped, control characters as
// \n, \t, ... or \u00XX, valid UTF-8 kept as it is, and each byte that is not part of valid UTF-8
// replaced by \ufffd (JSON text must be Unicode; lock names are bytes).
std::string json_quote(std::string_view text);

}  // namespace dlock::cli
