#pragma once

namespace qtft::model {

// The model's inputs by name, in TemporalFusionTransformerImpl::forward's order: the names
// of the ONNX export's graph inputs and of the .npy files `qtft forecast --save-inputs`
// writes. Each kind's columns hold its real inputs, then its categorical ones as level
// indices (exact in floating point); docs/DEPLOYMENT.md lists them.
inline constexpr const char* kObservedInput = "observed";  // float [B, L, O]
inline constexpr const char* kKnownInput = "known";        // float [B, L + H, K]
inline constexpr const char* kSymbolInput = "symbol";      // int64 [B]
inline constexpr const char* kStaticsInput = "statics";    // float [B, S], only when S > 0

}  // namespace qtft::model
