// The language-model task of the training harness. See lm/trainer.h.
#include "lm/trainer.h"

#include <filesystem>
#include <memory>

#include "core/backend.h"
#include "core/error.h"
#include "core/hash.h"
#include "io/settings_io.h"
#include "io/text.h"
#include "lm/evaluation.h"
#include "lm/text_data.h"
#include "lm/trained_model.h"
#include "ops/ops.h"
#include "plots/svg.h"
#include "training/data_parallel.h"
#include "training/device_flag.h"
#include "training/trainer.h"

namespace qkgrad::lm {

using training::BatchInfo;
using training::Evaluation;
using training::History;
using training::RunDir;
using training::TaskContext;

Device check_train_settings(const LmSettings& s) {
  const std::string program = "qkgrad-lm train";
  const Device device = training::parse_device(program, s.device);
  try {
    check_setting_values(s, "");
    model_config(s).validate();
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(cat(program, ": ", e.what()));
  }
  if (s.precision == "bf16") {
    if (s.dtype != DType::f32) throw UsageError(cat(program, ": --precision bf16 mixes bf16 products into float32 training; --dtype is ", dtype_name(s.dtype)));
    const std::string missing = backend(device).bf16_products_missing();
    if (!missing.empty()) throw UsageError(cat(program, ": --precision bf16: ", missing, "; use --precision f32"));
  }
  return device;
}

namespace {

// The harness's recipe: AdamW (decoupled weight decay, none on gains and biases), the schedule,
// the budgets; checkpoints/best by the validation loss.
training::LoopSettings loop_settings(const LmSettings& s) {
  training::LoopSettings l = training::shared_loop_settings(s);
  l.adam.beta2 = s.beta2;
  l.adam.weight_decay = s.weight_decay;
  l.adam.decoupled = true;
  l.adam.no_decay = LanguageModel::no_weight_decay();
  return l;
}

// Curves: train and validation loss per byte, validation bits per byte, the learning rate, each
// block's largest attention logit and attention entropy, and the attention gains (QKNorm's g,
// or the mean of each q/k norm's γ).
void write_curves(const RunDir& run, const History& h, const std::string& title) {
  std::vector<svg::Panel> panels;
  svg::Panel loss{"loss per byte (nats)", "step", "loss", {{"train", h.series("train_loss")}, {"valid", h.series("dev_loss")}}};
  if (const auto best = training::best_point(h.series("dev_loss"), true)) {
    loss.series.push_back({cat("checkpoints/best (step ", static_cast<int64_t>(best->first), ")"), {*best}});
  }
  panels.push_back(loss);
  panels.push_back({"validation bits per byte", "step", "bits", {{"valid", h.series("dev_bits_per_byte")}}});
  panels.push_back({"learning rate", "step", "lr", {{"lr", h.series("lr", "train_loss")}}});
  svg::Panel logits{"largest attention logit |s| (probe windows of valid.txt)", "step", "max |logit|", {}};
  for (const auto& [name, points] : h.object_series("attn_max_logit")) logits.series.push_back({name, points});
  svg::Panel entropy{"mean attention entropy (nats)", "step", "entropy", {}};
  for (const auto& [name, points] : h.object_series("attn_entropy")) entropy.series.push_back({name, points});
  if (!logits.series.empty()) panels.insert(panels.end(), {logits, entropy});
  if (const auto gains = h.object_series("g"); !gains.empty()) {
    svg::Panel panel{"attention gains (QKNorm's g, or the mean of a norm's γ)", "step", "gain", {}};
    for (const auto& [name, points] : gains) panel.series.push_back({name, points});
    panels.push_back(panel);
  }
  svg::write_svg(run.curves(), svg::line_charts(title, panels, 2));
}

class LanguageModelTask : public training::Task {
 public:
  LanguageModelTask(const LmSettings& settings, Device device) : settings_(settings), device_(device) {}

  // ---- the run directory: options.json and the checkpoints only ----
  std::vector<std::string> files() const override { return {}; }
  Json settings_json() const override { return to_json(settings_); }
  Json saved_settings(const std::string& options_path) const override { return to_json(load_run_settings(options_path)); }
  bool fixed_on_resume(const std::string& key) const override { return lm::fixed_on_resume(key); }
  std::string remove_attempt_leftovers(const RunDir&, const Json&) override { return ""; }

  // ---- the data ----
  void read_data(TaskContext& c) override {
    train_text_ = read_text_file(split_path(settings_.data, "train.txt"), "the training text");
    valid_text_ = read_text_file(split_path(settings_.data, "valid.txt"), "the validation text");
    train_ = std::make_unique<Windows>(train_text_, settings_.context);
    valid_ = std::make_unique<Windows>(valid_text_, settings_.context);
    QKGRAD_CHECK(train_->full() >= 1, split_path(settings_.data, "train.txt"), " has ", train_text_.size(),
                 " bytes: too few for one window of --context ", settings_.context, " (it needs ", settings_.context + 1,
                 "); give more text or a smaller --context");
    QKGRAD_CHECK(valid_->count() >= 1, split_path(settings_.data, "valid.txt"), " has ", valid_text_.size(),
                 " byte: nothing to predict; the validation text needs at least 2 bytes");
    c.progress.message(cat("data: train ", train_text_.size(), " bytes (", train_->full(), " windows of ", settings_.context,
                           "); valid ", valid_text_.size(), " bytes"));
    c.check_signal("reading the corpus");
  }
  Json data_fingerprint() const override {
    return Json{{"train bytes", train_text_.size()}, {"train text", hex64(fnv1a(train_text_))},
                {"valid bytes", valid_text_.size()}, {"valid text", hex64(fnv1a(valid_text_))}};
  }
  void make_files(TaskContext&) override {}
  void prepare_data(TaskContext&) override {}

  // ---- the model ----
  Module& build_model(TaskContext&) override {
    model_ = std::make_unique<LanguageModel>(model_config(settings_), device_);
    plan_ = std::make_unique<WindowPlan>(train_->full(), settings_.batch_size);
    probe_ = valid_->batch(spread_windows(valid_->count(), kProbeWindows), device_);
    return *model_;
  }
  std::string describe_model() const override {
    const LanguageModelConfig& c = model_->config();
    return cat("model: ", model_->parameter_count(), " parameters, ", c.layers, " layers, d ", c.d_model, ", ", c.heads,
               " heads, ffn ", c.ffn, ", ", attention_mode_name(c.attention), " attention, context ", settings_.context,
               " bytes, on ", device_summary(device_), settings_.precision == "bf16" ? " (bf16 products)" : "");
  }
  std::string describe_batches() const override {
    return cat(plan_->batches_per_epoch(), " batches of ", plan_->batch_size(), " windows per epoch");
  }
  std::string describe_evaluation() const override {
    const std::vector<int64_t> w = spread_windows(valid_->count(), settings_.eval_windows);
    return cat("validation loss, perplexity and bits per byte on ",
               static_cast<int64_t>(w.size()) == valid_->count() ? cat("all ", w.size()) : cat(w.size(), " of the ", valid_->count()),
               " windows of valid.txt");
  }
  Generator& dropout_generator() override { return model_->dropout_generator(); }
  void save_checkpoint(const std::string& dir, const TrainerState* trainer) override { lm::save_checkpoint(dir, *model_, trainer); }
  void load_weights(const std::string& dir) override { lm::load_weights(dir, *model_); }

  // ---- the batches and the loss ----
  int64_t batches_per_epoch() const override { return plan_->batches_per_epoch(); }
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const override { return plan_->epoch_order(seed, epoch); }
  BatchInfo select_batch(int64_t group) override {
    windows_ = plan_->group(group);
    const int64_t targets = static_cast<int64_t>(windows_.size()) * settings_.context;
    return BatchInfo{windows_, targets, targets};
  }
  Tensor loss_sum() override { return loss_sum(windows_); }
  // Cross-entropy (with the z-loss, if on) summed over the windows' bytes.
  Tensor loss_sum(const std::vector<int64_t>& share) override {
    const Windows::Batch b = train_->batch(share, device_);
    const Tensor logits = model_->forward(b.inputs, b.lengths);  // [B, C, 256]
    return cross_entropy(logits, b.targets, 0.0, -1, settings_.z_loss).sum;
  }
  std::string describe_batch(const std::vector<int64_t>& indices) const override {
    return cat(indices.size(), " windows starting with window ", indices.front(), " (byte ", indices.front() * settings_.context,
               " of train.txt)");
  }

  // ---- evaluation and the record ----
  Evaluation evaluate(const std::function<void(double, const std::string&)>& shown) override {
    const std::vector<int64_t> windows = spread_windows(valid_->count(), settings_.eval_windows);
    const TextScore s = score_text(*model_, *valid_, windows, settings_.batch_size, [&](int64_t done, int64_t total) {
      shown(static_cast<double>(done) / static_cast<double>(total), cat("validation: ", done, "/", total, " windows"));
    });
    Evaluation e;
    e.values["loss"] = s.loss();
    e.values["perplexity"] = s.perplexity();
    e.values["bits_per_byte"] = s.bits_per_byte();
    e.line = cat("valid ", s.line());
    return e;
  }
  // Each log line: every block's largest attention logit and mean attention entropy on the
  // probe (4 windows spread over valid.txt), and the attention gains (QKNorm's g, the mean γ).
  Json log_extras() const override {
    Json extras = Json::object(), g = Json::object();
    for (const auto& [name, t] : model_->named_parameters()) {
      const bool gain = name.ends_with("attn.g") || name.ends_with("q_norm.gamma") || name.ends_with("k_norm.gamma");
      const double offset = gain && name.ends_with("gamma") && settings_.qk_gain == "one_plus_w" ? 1.0 : 0.0;  // 1 + w
      if (gain) g[name] = offset + (t.numel() == 1 ? t.item() : mean(t).item());
    }
    if (!g.empty()) extras["g"] = g;
    const std::vector<LanguageModel::AttentionProbe> probes = model_->probe_attention(probe_.inputs, probe_.lengths);
    for (std::size_t i = 0; i < probes.size(); ++i) {
      extras["attn_max_logit"][cat("block ", i)] = probes[i].max_logit;
      extras["attn_entropy"][cat("block ", i)] = probes[i].mean_entropy;
    }
    return extras;
  }
  void write_curves(const RunDir& run, const History& history) const override {
    lm::write_curves(run, history, cat("qkgrad-lm ", attention_mode_name(settings_.attention), " (", settings_.preset, ")"));
  }

 private:
  const LmSettings& settings_;
  const Device device_;
  std::string train_text_, valid_text_;
  std::unique_ptr<Windows> train_, valid_;
  std::unique_ptr<LanguageModel> model_;
  std::unique_ptr<WindowPlan> plan_;
  std::vector<int64_t> windows_;
  static constexpr int64_t kProbeWindows = 4;
  Windows::Batch probe_;  // the windows whose attention each log line records
};

}  // namespace

int train(const TrainOptions& options, distributed::Communicator& comm) {
  const Device device = check_train_settings(options.settings);
  if (options.threads > 0) {
    set_num_threads(static_cast<int>(options.threads));
  } else if (comm.size() > 1) {
    set_num_threads(training::threads_per_rank(distributed::launched_local_ranks()));
  }
  LanguageModelTask task(options.settings, device);
  const training::LoopOptions run{options.run_dir, options.resume, options.on_nan, options.inject_nan_at_step, 0};
  return training::train(task, loop_settings(options.settings), run, comm);
}

}  // namespace qkgrad::lm
