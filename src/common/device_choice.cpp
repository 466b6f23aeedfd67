#include "qtft/common/device_choice.h"

#include "qtft/common/detail/enum_names.h"

namespace qtft {
namespace {
constexpr EnumNames<DeviceChoice, 3> kDeviceChoices{
    {{DeviceChoice::Cpu, "cpu"}, {DeviceChoice::Cuda, "cuda"}, {DeviceChoice::Auto, "auto"}}};
}  // namespace

DeviceChoice parse_device_choice(const std::string& name, const std::string& flag) {
  return parse_enum(kDeviceChoices, name, flag);
}

const char* device_choice_name(DeviceChoice choice) { return enum_name(kDeviceChoices, choice); }

}  // namespace qtft
