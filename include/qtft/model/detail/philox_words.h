#pragma once

#include <cstdint>

namespace qtft::model::detail {

// The 32-bit numbers that ATen's at::Philox4_32 engine(key, subsequence, 0) gives from
// `evaluations` * 4 successive calls to operator(), in that order, written to
// words[0, evaluations * 4). evaluations is at most 2^32 (the counter's low word does not
// wrap).
//
// Why not the engine itself: it evaluates one 128-bit counter at a time, and its ten rounds
// of 32x32->64 multiplies were 7-10% of a paper-sized training step (the dropout masks,
// drawn twice under checkpointing). The counters of a subsequence are independent, so here
// eight are evaluated side by side in a loop the compiler vectorizes (four lanes per
// multiply with AVX2, chosen at run time). Tested bitwise against the engine.
void philox_words(uint64_t key, uint64_t subsequence, int64_t evaluations, uint32_t* words);

}  // namespace qtft::model::detail
