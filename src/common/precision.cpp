#include "qtft/common/precision.h"

#include "qtft/common/detail/enum_names.h"

namespace qtft {
namespace {
constexpr EnumNames<Precision, 2> kPrecisions{{{Precision::Fp32, "fp32"}, {Precision::Bf16, "bf16"}}};
}  // namespace

Precision parse_precision(const std::string& name, const std::string& flag) {
  return parse_enum(kPrecisions, name, flag);
}

const char* precision_name(Precision precision) { return enum_name(kPrecisions, precision); }

}  // namespace qtft
