// Checkpoints: a directory that holds everything needed to rebuild a model and to continue its
// training exactly where it stopped.
//
//   DIR/config.json          the model's TransformerConfig (JSON), plus a format tag and an id
//   DIR/model.safetensors    every parameter, by its name ("encoder.layers.0.self_attn.g")
//   DIR/trainer.safetensors  the optimizer's state tensors, and in its metadata the step, the
//                            schedule state, the random generators' positions, the position in
//                            the data order ... (optional: a model-only export has none)
//
// save_checkpoint writes a complete new directory next to DIR and then swaps it in with one
// atomic rename, so DIR is always either the old checkpoint or the new one, complete. The three
// files carry the same id; a load refuses a mix. A save killed midway (SIGKILL, a crash) leaves
// DIR.tmp-PID behind; the next save of DIR removes those of processes that no longer run. A
// save that fails (a full disk, ...) throws an Error naming DIR and the reason, and leaves DIR
// as it was. Loads that overlap a save by another process read the files of one save (the ids
// tell; the pair is read again). docs/checkpoint.md documents every tensor.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "nn/transformer.h"

namespace qkgrad {

// Thrown by save_checkpoint when a tensor to be saved holds NaN or ±inf (nothing is written):
// a checkpoint never holds non-finite state, and loading refuses one that does.
class NonFiniteState : public Error {
 public:
  using Error::Error;
};

// What a training loop needs besides the weights to resume bit for bit.
struct TrainerState {
  std::vector<NamedTensor> optimizer_state;    // Optimizer::state_tensors()
  std::map<std::string, std::string> values;   // step, schedule state, RNG offsets, data position...

  // Typed access to values (numbers are stored exactly: integers as integers, doubles with
  // round-trip precision). get_* throw an Error naming the missing or malformed key.
  void set_int(const std::string& key, int64_t value);
  void set_double(const std::string& key, double value);
  int64_t get_int(const std::string& key) const;
  double get_double(const std::string& key) const;
};

Json config_to_json(const TransformerConfig& config);
// Validates every field; `source` names the file in errors.
TransformerConfig config_from_json(const Json& json, const std::string& source);

// Writes DIR atomically (see above), after checking that every parameter and optimizer tensor
// is finite (else NonFiniteState, naming the first bad tensor). trainer may be null (a model-only checkpoint). Tensors on
// a GPU are copied to the host one at a time as they are written; the files do not record a
// device, so a checkpoint saved from one device loads on any other.
void save_checkpoint(const std::string& dir, const Seq2SeqTransformer& model, const TrainerState* trainer);
// The same for any model: its config as config.json's "model" and its named parameters.
void save_checkpoint(const std::string& dir, const Json& model_config, const std::vector<NamedTensor>& parameters,
                     const TrainerState* trainer);

// DIR/config.json, validated: every field, within bounds (a config that asks for 2^40 FFN units
// is refused, not allocated), and the parameter count it implies against the size of
// model.safetensors.
TransformerConfig load_checkpoint_config(const std::string& dir);

// DIR/config.json's "model" (any model's config), after the checks of the file's format.
Json load_checkpoint_model_json(const std::string& dir);

// Copies the weights of DIR into `model`. Checks the architecture in config.json against the
// model's, then every name, shape and dtype; the first mismatch is an Error naming the file,
// the tensor and both values. The weights are read on the host and copied onto the model's
// device (Seq2SeqTransformer::device()). A weight that is NaN or ±inf is an Error naming it, and
// so is a vocabulary_id that differs from the model's (when both are known).
void load_model_weights(const std::string& dir, Seq2SeqTransformer& model);
// The same for any model: `check_model_config` is given config.json's "model" (and throws when
// it does not fit), then every parameter of `params` is copied from model.safetensors.
void load_model_weights(const std::string& dir, const std::vector<NamedTensor>& params,
                        const std::function<void(const Json& model_config)>& check_model_config);

// DIR/trainer.safetensors (which must come from the same save as the model). The state tensors
// are on the host; Optimizer::load_state copies them onto the parameters' device. A state tensor
// that is NaN or ±inf is an Error naming it.
TrainerState load_trainer_state(const std::string& dir);

bool checkpoint_exists(const std::string& dir);

}  // namespace qkgrad
