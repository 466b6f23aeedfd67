#include "qtft/common/cpu_features.h"

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

namespace qtft {
namespace {

// The value of the first "key : value" line whose key is `key`.
std::string_view field(std::string_view text, std::string_view key) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos) {
      std::string_view name = line.substr(0, colon);
      while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
      if (name == key) {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
        return value;
      }
    }
    start = end + 1;
  }
  return {};
}

}  // namespace

CpuBf16Features cpu_bf16_features_from(std::string_view cpuinfo) {
  CpuBf16Features features;
  const std::string_view name = field(cpuinfo, "model name");
  features.cpu_name = name.empty() ? "this CPU" : std::string(name);
  std::istringstream flags{std::string(field(cpuinfo, "flags"))};
  const std::set<std::string> present{std::istream_iterator<std::string>(flags), std::istream_iterator<std::string>()};
  features.avx512_bf16 = present.count("avx512_bf16") > 0;
  features.amx_bf16 = present.count("amx_bf16") > 0;
  return features;
}

const CpuBf16Features& this_cpu_bf16_features() {
  static const CpuBf16Features features = [] {
    std::ifstream in("/proc/cpuinfo");
    std::ostringstream text;
    text << in.rdbuf();
    return cpu_bf16_features_from(text.str());
  }();
  return features;
}

}  // namespace qtft
