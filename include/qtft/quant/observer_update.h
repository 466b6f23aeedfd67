#pragma once

namespace qtft::quant {

// When a training forward's batch moves an activation observer (--observer-update).
//   Immediate  each forward observes its input at once and fake-quantizes it with the
//              parameters that input produced.
//   Step       every forward of a step fake-quantizes with the parameters the step began
//              with and only records its input's min and max; the step's end takes them in
//              once. Under data parallelism all observers' extremes then travel in one
//              collective per step, not one per observer and forward (Transformer Engine's
//              delayed scaling does the same for FP8 scales).
enum class ObserverUpdate { Immediate, Step };

}  // namespace qtft::quant
