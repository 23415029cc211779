// Runtime sizes: a dim of a value whose static extent is a capacity (a bucket) and whose true
// size is a runtime scalar. XLA's dynamic padder then treats the rows past the size as padding:
// every reduction and contraction over the dim masks them with its identity, whatever they hold
// (NaN and inf included), so a rule written for static shapes gives the exact result over the
// true rows. Checked on both CPU plugins (PJRT 0.81 and 0.115) and accepted by libtpu's
// compiler: tools/bounded_dynamism_study.cc, docs/bucketing.md.
#pragma once

#include "hlo/builder.h"

namespace tpu::hlo {

// `x` with dim `dim` holding only `size` (an integer scalar, at most x's extent there) rows.
// The result keeps x's static type, so every op after it is printed as for static shapes; the
// compiler tracks the runtime size through them.
Value with_runtime_size(Builder& b, Value x, int64_t dim, Value size);

// A result computed from runtime-sized values, as a static buffer: XLA would otherwise return
// it with its dynamic dims (an `s64[1,<=128]` buffer that no static executable takes). The rows
// past a runtime size hold whatever the compiler left there.
Value static_result(Builder& b, Value x);

}  // namespace tpu::hlo
