// Input checks shared by the ops. Each throws qkgrad::Error naming the op, the tensors involved
// and the rule they broke.
#pragma once

#include <string_view>

#include "core/tensor.h"

namespace qkgrad {

// t is defined and holds f32 or f64 (the dtypes ops compute in).
void check_floating(std::string_view op, const Tensor& t, std::string_view name = "input");

// a and b are floating, with the same dtype and device.
void check_same_dtype_device(std::string_view op, const Tensor& a, const Tensor& b);

// ids is a defined i64 tensor (token ids, indices).
void check_index_tensor(std::string_view op, const Tensor& ids, std::string_view name = "indices");

// Every id lies in [0, limit); otherwise names the first offender, its position and `why`
// the limit is what it is. E.g. "embedding: token id 9 at flat position 3 of [2, 4] i64 cpu
// is out of range [0, 8) (the vocabulary has 8 entries)".
void check_ids_in_range(std::string_view op, const Tensor& ids, int64_t limit,
                        std::string_view what, std::string_view why);

}  // namespace qkgrad
