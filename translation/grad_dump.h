// A gradient dump: one teacher-forced batch, its loss and the gradient of every parameter,
// written to a safetensors file so that another implementation can recompute them.
// tools/torch_reference.py rebuilds the model in PyTorch from a checkpoint (docs/checkpoint.md)
// and compares its loss and gradients with such a dump:
//
//   save_checkpoint(dir, model, nullptr);
//   write_gradient_dump(model, src, src_lengths, tgt_in, tgt_out, tgt_lengths, 0.1, dir + "/grads.safetensors");
//   /usr/bin/python3 tools/torch_reference.py --checkpoint DIR --dump DIR/grads.safetensors
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

// One teacher-forced batch with dropout off (model.eval()): loss = label-smoothed cross-entropy
// summed over non-pad target tokens, divided by their count; backward; writes a safetensors file
// with tensors "src" [B,S] i64, "src_lengths" [B] i64, "tgt_in" [B,T] i64, "tgt_out" [B,T] i64,
// "tgt_lengths" [B] i64, "loss" [] (f64), and "grad.<parameter name>" for every parameter
// (the model's dtype); metadata "smoothing", "pad_id", "tokens". Returns the loss.
//
// Details:
// - "Non-pad target tokens" are the entries of tgt_out that differ from the config's pad_id
//   (cross_entropy's ignore_index), so tgt_out must hold pad_id beyond each row's length.
// - The label smoothing is cross_entropy's: q = (1 − ε)·onehot(target) + ε/V.
// - The parameters' gradients are cleared first, so the dump holds this batch's gradient
//   alone; afterwards they hold it too. A parameter the backward pass does not reach is written
//   as zeros. The model's training mode is restored on return.
// - src, tgt_in and tgt_out are on the model's device; the file is the same from any device.
// - The metadata also carries "format" ("qkgrad-gradient-dump") and "dtype" ("f32"/"f64");
//   "smoothing" is written with 17 significant digits (it reads back exactly).
// Throws an Error for inconsistent shapes or lengths, a batch with no target token, or a
// smoothing outside [0, 1).
double write_gradient_dump(Seq2SeqTransformer& model, const Tensor& src, const std::vector<int64_t>& src_lengths,
                           const Tensor& tgt_in, const Tensor& tgt_out, const std::vector<int64_t>& tgt_lengths,
                           double smoothing, const std::string& path);

}  // namespace qkgrad::translation
