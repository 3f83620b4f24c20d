#include "io/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <tuple>
#include <charconv>
#include <cstring>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <signal.h>
#include <unistd.h>

#include "core/autograd.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "io/setting_json.h"
#include "io/text.h"

namespace qkgrad {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "qkgrad-checkpoint";
constexpr int64_t kVersion = 1;

std::string new_checkpoint_id() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

// Puts the complete directory `fresh` where `dir` is, in one atomic step when the file system
// allows it (renameat2 RENAME_EXCHANGE swaps two paths atomically), and removes the old one.
// When it throws, `dir` still holds the previous checkpoint (if there was one).
void swap_in(const std::string& fresh, const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir)) {
    QKGRAD_CHECK(std::rename(fresh.c_str(), dir.c_str()) == 0, "cannot rename ", fresh, " to ", dir, ": ",
                 std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(fresh, ec);  // now holds the previous checkpoint
  } else {
    const int err = errno;
    QKGRAD_CHECK(err == EINVAL || err == ENOSYS || err == ENOTSUP, "cannot exchange ", fresh, " and ", dir, ": ",
                 std::strerror(err));
    // No atomic exchange on this file system: move the old one aside first. A crash between
    // the two renames leaves the old checkpoint at DIR.old-PID (load explains how to recover).
    const std::string aside = dir + ".old-" + std::to_string(::getpid());
    fs::remove_all(aside, ec);
    QKGRAD_CHECK(std::rename(dir.c_str(), aside.c_str()) == 0, "cannot move ", dir, " aside to ", aside, ": ",
                 std::strerror(errno));
    if (std::rename(fresh.c_str(), dir.c_str()) != 0) {
      const int rename_err = errno;
      const bool restored = std::rename(aside.c_str(), dir.c_str()) == 0;
      fail(cat("cannot rename ", fresh, " to ", dir, ": ", std::strerror(rename_err),
               restored ? "" : cat(" (and moving the previous checkpoint back failed: it is at ", aside, ")")));
    }
    fs::remove_all(aside, ec);
  }
  fsync_path(fs::path(dir).parent_path().empty() ? "." : fs::path(dir).parent_path().string());
}

std::string file_in(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

// Removes the leftovers of saves of DIR by processes that died mid-save (SIGKILL, a crash, a
// power cut): DIR<kind>PID, kind ".tmp-" (a half-written new checkpoint, or, after the exchange,
// the previous one) or ".old-" (the previous checkpoint moved aside on a file system without
// atomic exchange; only removed once DIR holds a newer complete checkpoint). Those of live
// processes are left alone (another process may be saving right now), except this process's
// own .old-, which is stale once this process's swap has completed.
void remove_stale_leftovers(const std::string& dir, const std::string& kind) {
  const fs::path p(dir);
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  const std::string prefix = p.filename().string() + kind;
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    pid_t pid = 0;
    const auto r = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (r.ec != std::errc() || r.ptr != digits.data() + digits.size()) continue;  // not ours
    const bool own = pid == ::getpid();
    if ((own && kind == ".old-") || (!own && !process_alive(pid))) stale.push_back(entry.path());
  }
  for (const fs::path& leftover : stale) fs::remove_all(leftover, ec);
}

void check_dir(const std::string& dir) {
  if (fs::is_directory(dir)) return;
  const fs::path p(dir);
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(p.filename().string() + ".old-", 0) == 0) {
      fail(cat("checkpoint ", dir, " is missing, but ", entry.path().string(),
               " holds the previous one (a save was interrupted); rename it to ", dir, " to use it"));
    }
  }
  fail(cat("checkpoint ", dir, ": no such directory (expected config.json and model.safetensors in it)"));
}

Json read_config_json(const std::string& dir) {
  check_dir(dir);
  const std::string path = file_in(dir, "config.json");
  const Json j = parse_json(read_file(path, 1 << 20), path);
  QKGRAD_CHECK(j.is_object() && j.contains("format") && j.at("format") == kFormat, path,
               ": not a qkgrad checkpoint config (its \"format\" is not \"", kFormat, "\")");
  const int64_t version = JsonFields(j, path).integer("version");
  QKGRAD_CHECK(version == kVersion, path, ": checkpoint format version ", version,
               " is not supported (this qkgrad reads version ", kVersion, ")");
  return j;
}

// "" if every element of t is finite, else what the first bad one is: "NaN at element 17".
std::string first_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return "";
  NoGradGuard reading;  // a parameter in training requires grad; reading its values is no op of the tape
  const Tensor host = t.to(Device::cpu);  // the same tensor when it is on the host
  auto scan = [&](const auto* p) -> std::string {
    for (int64_t i = 0; i < host.numel(); ++i) {
      if (!std::isfinite(p[i])) return cat(std::isnan(p[i]) ? "NaN" : p[i] > 0 ? "+inf" : "-inf", " at element ", i);
    }
    return "";
  };
  return host.dtype() == DType::f32 ? scan(host.data<float>()) : scan(host.data<double>());
}

// Throws (as E) when a tensor of `tensors` is not finite, naming it and `where` it is.
template <typename E = Error>
void check_finite(const std::vector<NamedTensor>& tensors, const std::string& where, const std::string& what_to_do) {
  for (const auto& [name, t] : tensors) {
    const std::string bad = first_non_finite(t);
    if (!bad.empty()) {
      throw E(cat(where, ": tensor '", name, "' ", t.shape(), " holds ", bad, " (a non-finite value)", what_to_do));
    }
  }
}

// Throws (as E) when a trainer value is a non-finite number ("nan", "inf", ... as std::to_chars
// writes them, and as a damaged file may hold them), naming the key and `where` it is. The
// trainer state's numbers are checked like its tensors: a NaN best dev score would freeze
// checkpoints/best and let patience count every evaluation.
template <typename E = Error>
void check_finite_values(const std::map<std::string, std::string>& values, const std::string& where,
                         const std::string& what_to_do) {
  for (const auto& [key, text] : values) {
    double v = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec == std::errc() && r.ptr == text.data() + text.size() && !std::isfinite(v)) {
      throw E(cat(where, ": value '", key, "' is ", text, " (a non-finite number)", what_to_do));
    }
  }
}

void check_id(const safetensors::Metadata& meta, const std::string& id, const std::string& path) {
  const auto it = meta.find("id");
  QKGRAD_CHECK(it != meta.end() && it->second == id, path, ": belongs to a different save than config.json (id ",
               it == meta.end() ? "missing" : it->second, " vs ", id,
               "); the checkpoint directory mixes files from two saves");
}

}  // namespace

// ---- TrainerState ----

void TrainerState::set_int(const std::string& key, int64_t value) { values[key] = std::to_string(value); }

void TrainerState::set_double(const std::string& key, double value) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);  // shortest exact round trip
  values[key] = std::string(buf, r.ptr);
}

int64_t TrainerState::get_int(const std::string& key) const {
  const auto it = values.find(key);
  QKGRAD_CHECK(it != values.end(), "trainer state: no value named '", key, "'");
  int64_t v = 0;
  const auto r = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  QKGRAD_CHECK(r.ec == std::errc() && r.ptr == it->second.data() + it->second.size(), "trainer state: '", key,
               "' is '", it->second, "', not an integer");
  return v;
}

double TrainerState::get_double(const std::string& key) const {
  const auto it = values.find(key);
  QKGRAD_CHECK(it != values.end(), "trainer state: no value named '", key, "'");
  double v = 0;
  const auto r = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  QKGRAD_CHECK(r.ec == std::errc() && r.ptr == it->second.data() + it->second.size(), "trainer state: '", key,
               "' is '", it->second, "', not a number");
  return v;
}

// ---- config <-> JSON ----

// The hyperparameters under their keys in the table (nn/transformer.h), then what the program
// derived. A key absent from an older checkpoint keeps its default: a new hyperparameter's
// default is the model as it was before it existed.
Json config_to_json(const TransformerConfig& c) {
  Json j = {{"vocab", c.vocab}};
  TransformerHyperparameters::for_each(c, [&](const SettingInfo& info, const auto& value) {
    j[info.key] = setting_to_json(value, info);
  });
  j.update({
      {"encoder_layers", c.encoder_layers},
      {"decoder_layers", c.decoder_layers},
      {"per_head_g", c.per_head_g},
      {"qknorm_length", c.qknorm_length},
      {"fixnorm", c.fixnorm},
      {"pad_id", c.pad_id},
      {"bos_id", c.bos_id},
      {"eos_id", c.eos_id},
      {"unk_id", c.unk_id},
      {"seed", static_cast<int64_t>(c.seed)},
      {"vocabulary_id", c.vocabulary_id},
  });
  return j;
}

TransformerConfig config_from_json(const Json& json, const std::string& source) {
  QKGRAD_CHECK(json.is_object(), source, ": the model config must be a JSON object");
  TransformerConfig c;
  try {
    const JsonFields j(json, "", "model");
    c.vocab = j.integer("vocab");
    TransformerHyperparameters::for_each(c, [&](const SettingInfo& info, auto& value) {
      if (j.has(info.key)) setting_from_json(j, info, value);
    });
    c.encoder_layers = j.integer("encoder_layers");
    c.decoder_layers = j.integer("decoder_layers");
    c.per_head_g = j.boolean("per_head_g");
    c.qknorm_length = j.number("qknorm_length");
    c.fixnorm = j.boolean("fixnorm");
    c.pad_id = j.integer("pad_id");
    c.bos_id = j.integer("bos_id");
    c.eos_id = j.integer("eos_id");
    c.unk_id = j.integer("unk_id");
    c.seed = static_cast<uint64_t>(j.integer("seed"));
    if (j.has("vocabulary_id")) c.vocabulary_id = j.string("vocabulary_id");  // absent before it existed
    // Bounds far above any model this library trains, so that an edited or corrupted file is
    // refused with its field named instead of asking for terabytes.
    for (const auto& [field, value, most] : {std::tuple{"vocab", c.vocab, int64_t{1} << 24},
                                             std::tuple{"d_model", c.d_model, int64_t{1} << 16},
                                             std::tuple{"heads", c.heads, int64_t{1} << 12},
                                             std::tuple{"ffn", c.ffn, int64_t{1} << 20},
                                             std::tuple{"encoder_layers", c.encoder_layers, int64_t{1} << 10},
                                             std::tuple{"decoder_layers", c.decoder_layers, int64_t{1} << 10}}) {
      QKGRAD_CHECK(value <= most, "\"", field, "\" is ", value, ", more than the largest supported (", most, ")");
    }
    c.validate();
  } catch (const Error& e) {
    fail(cat(source, ": invalid model config: ", e.what()));
  }
  return c;
}

// ---- saving ----

void save_checkpoint(const std::string& dir_name, const Seq2SeqTransformer& model, const TrainerState* trainer) {
  save_checkpoint(dir_name, config_to_json(model.config()), model.named_parameters(), trainer);
}

void save_checkpoint(const std::string& dir_name, const Json& model_config, const std::vector<NamedTensor>& parameters,
                     const TrainerState* trainer) {
  std::string dir = dir_name;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "ckpt/": the temporaries go next to it, not in it
  QKGRAD_CHECK(!dir.empty() && dir != "/" && dir != "." && dir != "..", "save_checkpoint: '", dir_name,
               "' is not a name for a checkpoint directory");
  // Nothing non-finite is ever saved: checked before anything is written.
  const std::string refusal = cat("; nothing was written (the previous checkpoint in ", dir, ", if any, is unchanged)");
  check_finite<NonFiniteState>(parameters, cat("save_checkpoint: refusing to save ", dir, ": the model"), refusal);
  if (trainer) {
    check_finite<NonFiniteState>(trainer->optimizer_state, cat("save_checkpoint: refusing to save ", dir, ": the optimizer state"),
                                 refusal);
    check_finite_values<NonFiniteState>(trainer->values, cat("save_checkpoint: refusing to save ", dir, ": the trainer state"),
                                        refusal);
  }
  const std::string fresh = dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  fs::remove_all(fresh, ec);          // a leftover of an interrupted save by this process
  remove_stale_leftovers(dir, ".tmp-");  // ... and by processes that died (frees their space first)
  QKGRAD_CHECK(fs::create_directories(fresh, ec) || fs::is_directory(fresh), "save_checkpoint: cannot create ",
               fresh, ": ", ec.message(), " (is the parent directory writable, and is there space on the disk?)");
  try {
    const std::string id = new_checkpoint_id();
    const Json config = {{"format", kFormat}, {"version", kVersion}, {"id", id}, {"model", model_config}};
    const std::string text = dump_json(config, 2) + "\n";
    write_file_atomically(file_in(fresh, "config.json"), [&](std::FILE* f) { std::fputs(text.c_str(), f); });
    safetensors::save(file_in(fresh, "model.safetensors"), parameters,
                      {{"format", kFormat}, {"kind", "model"}, {"id", id}});
    if (trainer) {
      safetensors::Metadata meta = {{"format", kFormat}, {"kind", "trainer"}, {"id", id}};
      for (const auto& [key, value] : trainer->values) {
        QKGRAD_CHECK(!meta.count(key), "save_checkpoint: trainer value name '", key, "' is reserved");
        meta[key] = value;
      }
      safetensors::save(file_in(fresh, "trainer.safetensors"), trainer->optimizer_state, meta);
    }
    fsync_path(fresh);
    swap_in(fresh, dir);
  } catch (const Error& e) {
    fs::remove_all(fresh, ec);  // the previous checkpoint at DIR is untouched
    fail(cat("save_checkpoint: cannot save ", dir, ": ", e.what(), "; the previous checkpoint in ", dir,
             " (if any) is unchanged"));
  } catch (...) {
    fs::remove_all(fresh, ec);
    throw;
  }
  remove_stale_leftovers(dir, ".old-");  // older than the checkpoint just saved
}

// ---- loading ----

bool checkpoint_exists(const std::string& dir) {
  return fs::is_regular_file(file_in(dir, "config.json")) && fs::is_regular_file(file_in(dir, "model.safetensors"));
}

TransformerConfig load_checkpoint_config(const std::string& dir) {
  const Json j = read_config_json(dir);
  const std::string path = file_in(dir, "config.json");
  const TransformerConfig c = config_from_json(JsonFields(j, path).at("model"), path);
  // The weights must fit in model.safetensors: checked before a model of this size is built.
  std::error_code ec;
  const auto bytes = fs::file_size(file_in(dir, "model.safetensors"), ec);
  const double needed = static_cast<double>(c.minimum_parameter_count()) * static_cast<double>(dtype_size(c.dtype));
  QKGRAD_CHECK(ec || static_cast<double>(bytes) >= needed, path, ": describes a model of at least ", c.minimum_parameter_count(),
               " parameters (", needed, " bytes of ", dtype_name(c.dtype), "), but ", file_in(dir, "model.safetensors"),
               " has only ", bytes, " bytes: that file is truncated, or config.json does not belong to it (was it edited?)");
  return c;
}

Json load_checkpoint_model_json(const std::string& dir) {
  const std::string path = file_in(dir, "config.json");
  const Json config = read_config_json(dir);
  return JsonFields(config, path).at("model");
}

namespace {

// DIR/config.json (already read: `config`) and DIR/FILE of one save. Another process may
// replace DIR (save_checkpoint) between the two reads, e.g. translate while training saves
// best: then config.json has a new id by now, and the pair is read again. An id mismatch that
// stays is a directory that mixes files of two saves.
struct SameSave {
  Json config;
  safetensors::Contents contents;
};
SameSave read_same_save(const std::string& dir, const char* file, Json config) {
  const std::string path = file_in(dir, file);
  for (int attempt = 0;; ++attempt) {
    safetensors::Contents contents = safetensors::load(path);
    const std::string id = JsonFields(config, file_in(dir, "config.json")).string("id");
    const auto it = contents.metadata.find("id");
    if (it != contents.metadata.end() && it->second == id) return {std::move(config), std::move(contents)};
    Json now = read_config_json(dir);
    if (attempt >= 4 || (now.contains("id") && now.at("id") == id)) check_id(contents.metadata, id, path);  // throws
    config = std::move(now);
  }
}

// Every way a checkpoint's model differs from another: "d_model 256 vs 512", ... (empty: none).
// A vocabulary_id unknown on either side is no difference (checkpoints before it existed).
std::vector<std::string> config_differences(const TransformerConfig& saved, const TransformerConfig& mine) {
  std::vector<std::string> out;
  const Json a = config_to_json(saved), b = config_to_json(mine);
  auto compare = [&](const std::string& key) {
    auto shown = [](const Json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
    if (a.at(key) != b.at(key)) out.push_back(cat(key, " ", shown(a.at(key)), " vs ", shown(b.at(key))));
  };
  compare("vocab");
  if (!saved.vocabulary_id.empty() && !mine.vocabulary_id.empty() && saved.vocabulary_id != mine.vocabulary_id) {
    out.push_back(cat("subword vocabulary ", saved.vocabulary_id, " vs ", mine.vocabulary_id,
                      " (the same size does not make the same pieces)"));
  }
  // The architecture: the hyperparameters a resumed run keeps, but the dtype (converted on loading).
  TransformerHyperparameters::for_each(saved, [&](const SettingInfo& info, const auto&) {
    if (info.resume == Resume::fixed && std::string(info.key) != "dtype") compare(info.key);
  });
  for (const char* key : {"encoder_layers", "decoder_layers", "per_head_g", "fixnorm"}) compare(key);
  return out;
}

}  // namespace

void load_model_weights(const std::string& dir, Seq2SeqTransformer& model) {
  const std::string config_path = file_in(dir, "config.json");
  const TransformerConfig& mine = model.config();
  load_model_weights(dir, model.named_parameters(), [&](const Json& model_config) {
    const TransformerConfig saved = config_from_json(model_config, config_path);
    const std::vector<std::string> differences = config_differences(saved, mine);
    QKGRAD_CHECK(differences.empty(), config_path, ": the checkpoint does not fit this model: ", join(differences, "; "),
                 " (the checkpoint's value first); build the model from the checkpoint's config, or use the subword",
                 " model it was trained with");
  });
}

void load_model_weights(const std::string& dir, const std::vector<NamedTensor>& params,
                        const std::function<void(const Json& model_config)>& check_model_config) {
  const std::string config_path = file_in(dir, "config.json");
  auto check_config = [&](const Json& j) { check_model_config(JsonFields(j, config_path).at("model")); };
  const Json first = read_config_json(dir);
  check_config(first);  // before reading the (large) tensor file
  const SameSave save = read_same_save(dir, "model.safetensors", first);
  if (save.config.at("id") != first.at("id")) check_config(save.config);

  const std::string path = file_in(dir, "model.safetensors");
  const safetensors::Contents& contents = save.contents;
  check_finite(contents.tensors, path, "; these weights are unusable: use another checkpoint, or train again");
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : contents.tensors) by_name[name] = &t;
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    const auto it = by_name.find(name);
    QKGRAD_CHECK(it != by_name.end(), path, ": tensor '", name, "' is missing (the model has ", params.size(),
                 " parameter tensors, the file ", contents.tensors.size(), ")");
    const Tensor& t = *it->second;
    QKGRAD_CHECK(t.shape() == p.shape(), path, ": tensor '", name, "' has shape ", t.shape(), " but the model's is ", p.shape());
    QKGRAD_CHECK(is_floating(t.dtype()), path, ": tensor '", name, "' is ", dtype_name(t.dtype()), "; parameters are f32 or f64");
    Tensor target = p;
    target.copy_(t);  // host -> the model's device; converts f32 <-> f64 if the dtypes differ
    by_name.erase(it);
  }
  QKGRAD_CHECK(by_name.empty(), path, ": tensor '", by_name.empty() ? "" : by_name.begin()->first,
               "' is not a parameter of this model (", by_name.size(), " unexpected tensors)");
}

TrainerState load_trainer_state(const std::string& dir) {
  const Json j = read_config_json(dir);
  const std::string path = file_in(dir, "trainer.safetensors");
  QKGRAD_CHECK(fs::is_regular_file(path), path, ": missing; this checkpoint holds a model only and cannot resume training");
  SameSave save = read_same_save(dir, "trainer.safetensors", j);
  TrainerState state;
  check_finite(save.contents.tensors, path, "; this optimizer state cannot continue training");
  state.optimizer_state = std::move(save.contents.tensors);
  for (const auto& [key, value] : save.contents.metadata) {
    if (key != "format" && key != "kind" && key != "id") state.values[key] = value;
  }
  check_finite_values(state.values, path, "; this trainer state cannot continue training");
  return state;
}

}  // namespace qkgrad
