// The PyTorch cross-check: tools/torch_reference.py rebuilds the Transformer in PyTorch from
// docs/checkpoint.md alone and recomputes the loss and every gradient of a batch that qkgrad
// dumped (translation/grad_dump.h). Runs when /usr/bin/python3 can import torch
// (Debian: apt-get install python3-torch); otherwise it warns and passes.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/checkpoint.h"
#include "nn/transformer.h"
#include "translation/grad_dump.h"
#include "temp_dir.h"

using namespace qkgrad;
namespace fs = std::filesystem;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

using testing::TempDir;

bool torch_available() {
  static const bool available =
      std::system((std::string(kPython) + " -c \"import torch\" > /dev/null 2>&1").c_str()) == 0;
  return available;
}

struct ScriptResult {
  int status;  // the script's exit status, or -1 if it did not exit normally
  std::string output;
};

// Runs tools/torch_reference.py with `arguments`, capturing stdout and stderr in `dir`.
ScriptResult run_script(const TempDir& dir, const std::string& arguments) {
  const std::string out = dir / "script-output.txt";
  const std::string command = std::string(kPython) + " '" + QKGRAD_SOURCE_DIR + "/tools/torch_reference.py' " +
                              arguments + " > '" + out + "' 2>&1";
  const int raw = std::system(command.c_str());
  std::ifstream file(out);
  std::stringstream text;
  text << file.rdbuf();
  return {raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, "$ " + command + "\n" + text.str()};
}

TransformerConfig tiny_config(DType dtype, AttentionMode attention, NormType norm, bool per_head_g) {
  TransformerConfig c;
  c.vocab = 14;
  c.d_model = 16;
  c.heads = 2;
  c.ffn = 24;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.norm = norm;
  c.attention = attention;
  c.per_head_g = per_head_g;
  c.qknorm_length = 9;
  c.fixnorm = true;
  c.dropout = c.attention_dropout = c.ffn_dropout = c.word_dropout = 0.1;  // must be switched off by the dump
  c.dtype = dtype;
  c.seed = 11;
  return c;
}

// Four rows of different lengths, padded with 0 (ids: 0 pad, 1 bos, 2 eos, symbols from 4). The
// last source row is empty: its cross-attention rows see no key at all (P = 0).
struct Batch {
  Tensor src, tgt_in, tgt_out;
  std::vector<int64_t> src_lengths{5, 2, 4, 0}, tgt_lengths{3, 6, 1, 2};
};

Batch padded_batch() {
  Batch b;
  b.src = Tensor::from_ids({5, 9, 4, 13, 2,  //
                            7, 2, 0, 0, 0,   //
                            12, 6, 6, 2, 0,  //
                            0, 0, 0, 0, 0},
                           {4, 5});
  b.tgt_in = Tensor::from_ids({1, 8, 11, 0, 0, 0,   //
                               1, 4, 4, 10, 5, 13,  //
                               1, 0, 0, 0, 0, 0,    //
                               1, 9, 0, 0, 0, 0},
                              {4, 6});
  b.tgt_out = Tensor::from_ids({8, 11, 2, 0, 0, 0,   //
                                4, 4, 10, 5, 13, 2,  //
                                2, 0, 0, 0, 0, 0,    //
                                9, 2, 0, 0, 0, 0},
                               {4, 6});
  return b;
}

// Writes a checkpoint of `model` and a gradient dump of the batch into `dir`.
void write_inputs(const TempDir& dir, Seq2SeqTransformer& model) {
  save_checkpoint(dir / "ckpt", model, nullptr);
  const Batch b = padded_batch();
  const double loss = translation::write_gradient_dump(model, b.src, b.src_lengths, b.tgt_in, b.tgt_out, b.tgt_lengths,
                                                     0.1, dir / "grads.safetensors");
  REQUIRE(std::isfinite(loss));
  REQUIRE(loss > 0);
}

std::string describe_config(const TransformerConfig& c) {
  return std::string(dtype_name(c.dtype)) + ", " + attention_mode_name(c.attention) +
         ", " + (c.norm == NormType::layer_norm ? "layer_norm" : "scale_norm") + (c.per_head_g ? ", per-head g" : "");
}

}  // namespace

TEST_CASE("PyTorch recomputes qkgrad's loss and every gradient from the checkpoint alone", "[torch][e2e]") {
  if (!torch_available()) {
    WARN("skipped: python3-torch is not installed (apt-get install python3-torch)");
    return;
  }
  for (DType dtype : {DType::f64, DType::f32}) {
    for (AttentionMode attention :
         {AttentionMode::qknorm, AttentionMode::scaled_dot, AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
      for (NormType norm : {NormType::layer_norm, NormType::scale_norm}) {
        // Per-head parameters in one of the two norms of every mode that has them.
        const bool per_head_g = attention != AttentionMode::scaled_dot && norm == NormType::scale_norm;
        const TransformerConfig config = tiny_config(dtype, attention, norm, per_head_g);
        INFO(describe_config(config));
        TempDir dir;
        Seq2SeqTransformer model(config);
        write_inputs(dir, model);
        CHECK(model.training());  // the dump switched dropout off only for its own pass
        const ScriptResult result =
            run_script(dir, "--checkpoint '" + (dir / "ckpt") + "' --dump '" + (dir / "grads.safetensors") + "'");
        INFO(result.output);
        CHECK(result.status == 0);
      }
    }
  }
}

TEST_CASE("the PyTorch cross-check fails for gradients of other weights, and for missing files", "[torch]") {
  if (!torch_available()) {
    WARN("skipped: python3-torch is not installed (apt-get install python3-torch)");
    return;
  }
  TempDir dir;
  TransformerConfig config = tiny_config(DType::f64, AttentionMode::qknorm, NormType::layer_norm, false);
  Seq2SeqTransformer model(config);
  write_inputs(dir, model);  // the dump of this model
  config.seed = 12;
  Seq2SeqTransformer other(config);
  save_checkpoint(dir / "ckpt", other, nullptr);  // ... against another model's weights
  {
    const ScriptResult result =
        run_script(dir, "--checkpoint '" + (dir / "ckpt") + "' --dump '" + (dir / "grads.safetensors") + "'");
    INFO(result.output);
    CHECK(result.status == 1);
    CHECK(result.output.find("FAIL") != std::string::npos);
  }
  {
    const ScriptResult result =
        run_script(dir, "--checkpoint '" + (dir / "ckpt") + "' --dump '" + (dir / "missing.safetensors") + "'");
    INFO(result.output);
    CHECK(result.status == 2);
    CHECK(result.output.find("missing.safetensors: no such file") != std::string::npos);
  }
  {
    const ScriptResult result =
        run_script(dir, "--checkpoint '" + (dir / "nowhere") + "' --dump '" + (dir / "grads.safetensors") + "'");
    INFO(result.output);
    CHECK(result.status == 2);
    CHECK(result.output.find("no such checkpoint directory") != std::string::npos);
  }
}
