// Checkpoints: round trips, exact resume (bit-identical parameters with dropout on), and clear
// errors for missing, mismatched, mixed or corrupted checkpoints.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <fstream>

#include "core/autograd.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "toy_seq2seq.h"
#include "temp_dir.h"

using namespace qkgrad;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

TransformerConfig small_config(AttentionMode mode) {
  TransformerConfig c;
  c.vocab = 14;
  c.d_model = 16;
  c.heads = 2;
  c.ffn = 24;
  c.encoder_layers = 2;
  c.decoder_layers = 1;
  c.attention = mode;
  c.qknorm_length = 9;
  c.dropout = c.attention_dropout = c.ffn_dropout = 0.1;
  c.word_dropout = 0.1;
  c.seed = 7;
  return c;
}

// A training run's moving parts: the model, Adam, a warmup schedule and the data stream.
struct Run {
  Seq2SeqTransformer model;
  Adam opt;
  InverseSqrtLr schedule{1e-3, 4};
  Generator data{21, 3};
  explicit Run(const TransformerConfig& c) : model(c), opt(model.named_parameters(), AdamOptions{}) {}

  void train(int steps) {
    model.train();
    for (int i = 0; i < steps; ++i) {
      const toy::Batch b = toy::make_batch(data, 8, 10, 2, 6, true);
      const LossSum loss = cross_entropy(model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out, 0.1, 0);
      opt.zero_grad();
      (loss.sum / static_cast<double>(loss.tokens)).backward();
      clip_grad_norm(model.parameters(), 1.0);
      opt.set_lr(schedule.lr(opt.steps() + 1));
      opt.step();
    }
  }
  TrainerState state() {
    TrainerState s;
    s.optimizer_state = opt.state_tensors();
    s.set_int("step", opt.steps());
    s.set_int("dropout_rng_offset", static_cast<int64_t>(model.dropout_generator().offset()));
    s.set_int("data_rng_offset", static_cast<int64_t>(data.offset()));
    return s;
  }
  void restore(const TrainerState& s) {
    opt.load_state(s.optimizer_state, s.get_int("step"));
    model.dropout_generator().set_offset(static_cast<uint64_t>(s.get_int("dropout_rng_offset")));
    data.set_offset(static_cast<uint64_t>(s.get_int("data_rng_offset")));
  }
};

std::vector<std::vector<double>> weights(const Seq2SeqTransformer& m) {
  std::vector<std::vector<double>> w;
  for (const auto& [name, t] : m.named_parameters()) w.push_back(t.to_vector());
  return w;
}

}  // namespace

TEST_CASE("save then load gives a model with identical outputs", "[checkpoint]") {
  TempDir tmp;
  Seq2SeqTransformer a(small_config(AttentionMode::qknorm));
  save_checkpoint(tmp / "ckpt", a, nullptr);
  const TransformerConfig loaded = load_checkpoint_config(tmp / "ckpt");
  CHECK(loaded.d_model == 16);
  CHECK(loaded.attention == AttentionMode::qknorm);
  TransformerConfig other_seed = loaded;
  other_seed.seed = 99;
  Seq2SeqTransformer b(other_seed);
  CHECK(weights(a) != weights(b));
  load_model_weights(tmp / "ckpt", b);
  CHECK(weights(a) == weights(b));
  a.eval();
  b.eval();
  Generator g(1);
  const toy::Batch batch = toy::make_batch(g, 4, 10, 2, 6, false);
  NoGradGuard no_grad;
  CHECK(a.forward(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_lengths).to_vector() ==
        b.forward(batch.src, batch.src_lengths, batch.tgt_in, batch.tgt_lengths).to_vector());
}

TEST_CASE("rms_qknorm and layer_qknorm checkpoints name the norms' parameters, round-trip, and refuse another mode",
          "[checkpoint]") {
  for (const bool per_head : {false, true}) {
    for (AttentionMode mode : {AttentionMode::rms_qknorm, AttentionMode::layer_qknorm}) {
      INFO(attention_mode_name(mode) << (per_head ? ", per head" : ", shared"));
      TempDir tmp;
      TransformerConfig c = small_config(mode);
      c.per_head_g = per_head;
      Run run(c);
      run.train(3);  // the gains and biases move away from 1 and 0
      save_checkpoint(tmp / "ckpt", run.model, nullptr);
      std::map<std::string, Shape> shapes;
      for (const auto& [name, t] : run.model.named_parameters()) shapes[name] = t.shape();
      CHECK(c.minimum_parameter_count() < static_cast<int64_t>(run.model.parameter_count()));
      const Shape expected = per_head ? Shape{2, 8} : Shape{8};  // d = 16 / 2
      CHECK(shapes.at("decoder.layers.0.cross_attn.q_norm.gamma") == expected);
      CHECK(shapes.at("encoder.layers.1.self_attn.k_norm.gamma") == expected);
      CHECK(shapes.count("encoder.layers.0.self_attn.q_norm.beta") == (mode == AttentionMode::layer_qknorm ? 1u : 0u));
      CHECK(shapes.count("encoder.layers.0.self_attn.g") == 0);
      const TransformerConfig loaded = load_checkpoint_config(tmp / "ckpt");
      CHECK(loaded.attention == mode);
      Seq2SeqTransformer b(loaded);
      load_model_weights(tmp / "ckpt", b);
      CHECK(weights(run.model) == weights(b));
      TransformerConfig other = c;
      other.attention = mode == AttentionMode::rms_qknorm ? AttentionMode::layer_qknorm : AttentionMode::rms_qknorm;
      Seq2SeqTransformer wrong(other);
      CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", wrong), Contains(std::string("attention ") + attention_mode_name(mode)));
    }
  }
}

TEST_CASE("exact resume: k steps + save + load + the rest equals all steps straight, bit for bit", "[checkpoint]") {
  for (AttentionMode mode : {AttentionMode::qknorm, AttentionMode::scaled_dot}) {
    TempDir tmp;
    const TransformerConfig c = small_config(mode);  // dropout and word dropout on
    Run straight(c);
    straight.train(12);

    Run first(c);
    first.train(5);
    const TrainerState saved_state = first.state();
    save_checkpoint(tmp / "run", first.model, &saved_state);

    Run resumed(load_checkpoint_config(tmp / "run"));
    load_model_weights(tmp / "run", resumed.model);
    resumed.restore(load_trainer_state(tmp / "run"));
    resumed.train(7);

    CHECK(resumed.opt.steps() == 12);
    CHECK(weights(resumed.model) == weights(straight.model));
    CHECK(weights(first.model) != weights(straight.model));
  }
}

TEST_CASE("a second save replaces the first atomically; a failed save keeps the previous checkpoint", "[checkpoint]") {
  TempDir tmp;
  Seq2SeqTransformer a(small_config(AttentionMode::qknorm));
  save_checkpoint(tmp / "ckpt", a, nullptr);
  TransformerConfig c2 = small_config(AttentionMode::qknorm);
  c2.seed = 8;
  Seq2SeqTransformer b(c2);
  save_checkpoint(tmp / "ckpt", b, nullptr);
  CHECK(load_checkpoint_config(tmp / "ckpt").seed == 8);
  TrainerState bad;
  bad.values["id"] = "reserved";
  CHECK_THROWS_WITH(save_checkpoint(tmp / "ckpt", a, &bad), Contains("trainer value name 'id' is reserved"));
  CHECK(load_checkpoint_config(tmp / "ckpt").seed == 8);  // untouched
  int entries = 0;
  for (const auto& e : fs::directory_iterator(tmp.path)) entries += e.path().filename().string().rfind("ckpt", 0) == 0;
  CHECK(entries == 1);  // no temporary directory left behind
}

TEST_CASE("checkpoint errors name the file and the first problem", "[checkpoint][errors]") {
  TempDir tmp;
  Seq2SeqTransformer a(small_config(AttentionMode::qknorm));
  TrainerState st;
  st.set_int("step", 3);
  save_checkpoint(tmp / "ckpt", a, &st);

  CHECK_THROWS_WITH(load_checkpoint_config(tmp / "nope"), Contains("nope: no such directory"));
  TransformerConfig wider = small_config(AttentionMode::qknorm);
  wider.d_model = 32;
  Seq2SeqTransformer w(wider);
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", w), Contains("does not fit this model: d_model 16 vs 32"));
  Seq2SeqTransformer s(small_config(AttentionMode::scaled_dot));
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", s), Contains("attention qknorm vs scaled_dot"));
  // Every difference is named, not only the first.
  TransformerConfig other = small_config(AttentionMode::scaled_dot);
  other.d_model = 32;
  other.ffn += 8;
  other.vocabulary_id = "spm-fnv1a64:0000000000000001";
  Seq2SeqTransformer o(other);
  // (the saved checkpoint records no vocabulary_id, so none is claimed to differ)
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", o),
                    Contains("d_model 16 vs 32") && Contains("ffn ") && Contains("attention qknorm vs scaled_dot"));

  // Files from two different saves.
  save_checkpoint(tmp / "other", a, &st);
  fs::copy_file(tmp / "other/model.safetensors", tmp / "ckpt/model.safetensors", fs::copy_options::overwrite_existing);
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", a), Contains("belongs to a different save"));

  // A truncated weights file.
  save_checkpoint(tmp / "ckpt", a, nullptr);
  fs::resize_file(tmp / "ckpt/model.safetensors", fs::file_size(tmp / "ckpt/model.safetensors") / 2);
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", a), Contains("model.safetensors"));
  CHECK_THROWS_WITH(load_trainer_state(tmp / "ckpt"), Contains("cannot resume training"));

  // A broken config.
  save_checkpoint(tmp / "ckpt", a, nullptr);
  std::ofstream(tmp / "ckpt/config.json") << "{\"format\": \"qkgrad-checkpoint\", \"version\": 1, \"model\": {\"vocab\": 14}}";
  CHECK_THROWS_WITH(load_checkpoint_config(tmp / "ckpt"), Contains("config.json: invalid model config"));

  TrainerState values;
  values.values["x"] = "1.5";
  CHECK_THROWS_WITH(values.get_int("x"), Contains("'x' is '1.5', not an integer"));
  CHECK_THROWS_WITH(values.get_int("y"), Contains("no value named 'y'"));
}

TEST_CASE("config.json holds every hyperparameter of the table and reads each back; an older file keeps the defaults",
          "[checkpoint]") {
  TransformerConfig c;
  c.vocab = 50;
  // Each hyperparameter away from its default: its last choice, or the top of its range.
  TransformerHyperparameters::for_each(c, [](const SettingInfo& info, auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_enum_v<T>) {
      REQUIRE(enum_from_text(info.allowed.choices.back(), info.allowed, value));
    } else if constexpr (std::is_same_v<T, std::string>) {
      REQUIRE_FALSE(info.allowed.choices.empty());
      value = info.allowed.choices.back();
    } else {
      value = static_cast<T>(info.allowed.max);
    }
  });
  const Json saved = config_to_json(c);
  const Json defaults = config_to_json(TransformerConfig{});
  Json older = saved;  // as a checkpoint written before the hyperparameters existed
  TransformerHyperparameters::for_each(c, [&](const SettingInfo& info, const auto&) {
    INFO(info.key);
    CHECK(saved.at(info.key) != defaults.at(info.key));
    older.erase(info.key);
  });
  CHECK(config_to_json(config_from_json(saved, "config.json")) == saved);
  const Json read_back = config_to_json(config_from_json(older, "config.json"));
  TransformerHyperparameters::for_each(c, [&](const SettingInfo& info, const auto&) {
    CHECK(read_back.at(info.key) == defaults.at(info.key));
  });
}
