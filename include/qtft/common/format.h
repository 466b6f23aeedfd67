#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qtft {

// Shortest text that reads back to the same double ("100.25", "1e-05", "nan").
std::string format_number(double value);

// Six significant digits, as printf's %g ("0.0001" for 1e-3 * 0.1): for people, not files.
std::string format_rounded(double value);

// "2024-01-02T08:30:00Z", with fractional seconds only when present.
std::string format_utc(int64_t timestamp_ns);

// The inverse for people's text: "2024-01-02", "2024-01-02T08:30", "2024-01-02 08:30:15Z"
// (UTC; a space may stand for the T), as ns since the epoch. Throws UsageError naming `what`.
int64_t parse_utc(const std::string& text, const std::string& what);

// "a, b, c": names as a message lists them.
std::string join_names(const std::vector<std::string>& names);

// "[2, 3]": a tensor shape as people write it.
std::string format_shape(const std::vector<int64_t>& shape);

// "1.5 GiB", "12.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

// "4GiB", "512MiB", "1.5GB", "800M", "123456": binary for GiB/MiB/KiB (and the single
// letters G, M, K), decimal for GB/MB/KB, bytes without a suffix. Throws UsageError naming
// `what` (a flag) and the text when it is not a positive size.
int64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace qtft
