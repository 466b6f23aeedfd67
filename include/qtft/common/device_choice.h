#pragma once

#include <string>

namespace qtft {

// Where to run: the CPU, the first CUDA GPU, or CUDA when one is usable and the CPU
// otherwise. LibTorch-free, so that serving headers can name it; artifact::resolve_device
// turns it into a device.
enum class DeviceChoice { Cpu, Cuda, Auto };
// "cpu", "cuda" or "auto"; anything else throws UsageError naming `flag`.
DeviceChoice parse_device_choice(const std::string& name, const std::string& flag = "--device");
const char* device_choice_name(DeviceChoice choice);

}  // namespace qtft
