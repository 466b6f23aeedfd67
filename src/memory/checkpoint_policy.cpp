#include "qtft/memory/checkpoint_policy.h"

#include "qtft/common/detail/enum_names.h"

namespace qtft::memory {

namespace {
constexpr EnumNames<CheckpointPolicy, 4> kCheckpointPolicies{{{CheckpointPolicy::None, "none"},
                                                              {CheckpointPolicy::Blocks, "blocks"},
                                                              {CheckpointPolicy::Lstm, "lstm"},
                                                              {CheckpointPolicy::Auto, "auto"}}};
}  // namespace

CheckpointPolicy parse_checkpoint_policy(const std::string& name) {
  return parse_enum(kCheckpointPolicies, name, "--checkpoint-policy");
}

const char* checkpoint_policy_name(CheckpointPolicy policy) { return enum_name(kCheckpointPolicies, policy); }

}  // namespace qtft::memory
