#include "qtft/data/bars/local_time.h"

#include <arrow/array.h>
#include <arrow/buffer.h>
#include <arrow/compute/api_scalar.h>
#include <arrow/compute/initialize.h>

#include <mutex>

#include "qtft/common/error.h"

namespace qtft::data {
namespace {

// Arrow's compute kernels live in a library of their own that registers them once per
// process on request; a registry of Arrow's, not state of the caller's.
void register_arrow_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (auto status = arrow::compute::Initialize(); !status.ok()) {
      throw Error("cannot start Arrow's compute functions: " + status.ToString());
    }
  });
}

arrow::Result<std::shared_ptr<arrow::Array>> to_local(std::span<const int64_t> utc_ns, const std::string& zone) {
  register_arrow_kernels();
  // The timestamps are wrapped, not copied: Arrow reads them in place.
  auto values = std::make_shared<arrow::Buffer>(reinterpret_cast<const uint8_t*>(utc_ns.data()),
                                                static_cast<int64_t>(utc_ns.size_bytes()));
  auto data = arrow::ArrayData::Make(arrow::timestamp(arrow::TimeUnit::NANO, zone), static_cast<int64_t>(utc_ns.size()),
                                     {nullptr, std::move(values)}, 0);
  ARROW_ASSIGN_OR_RAISE(auto local, arrow::compute::LocalTimestamp(arrow::MakeArray(data)));
  return local.make_array();
}

}  // namespace

bool is_time_zone(const std::string& zone) {
  if (zone.empty()) return false;
  // The zone is looked up when a value is converted, so one value tests the name.
  const int64_t epoch = 0;
  return to_local(std::span<const int64_t>(&epoch, 1), zone).ok();
}

void local_wall_clock(std::span<const int64_t> utc_ns, const std::string& zone, std::vector<int64_t>& out) {
  if (zone.empty()) {
    out.assign(utc_ns.begin(), utc_ns.end());
    return;
  }
  const int64_t epoch = 0;
  auto local = to_local(utc_ns.empty() ? std::span<const int64_t>(&epoch, 1) : utc_ns, zone);
  if (!local.ok()) {
    throw Error("calendar time zone '" + zone + "' is not in the tz database (" + local.status().message() + ")");
  }
  const auto& values = static_cast<const arrow::TimestampArray&>(**local);
  out.assign(values.raw_values(), values.raw_values() + utc_ns.size());
}

}  // namespace qtft::data
