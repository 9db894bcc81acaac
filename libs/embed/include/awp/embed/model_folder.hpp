// The pieces of a model folder, read one at a time (load_model() puts them together).
#pragma once

#include <awp/embed/bert.hpp>

#include <filesystem>

namespace awp::embed {

/// config.json: sizes, layer_norm_eps, hidden_act (must be "gelu"), model_type (must be "bert").
bert_config read_bert_config(const std::filesystem::path& config_json);
/// model.safetensors with Hugging Face BERT names (optional "bert." prefix, pooler ignored),
/// F32/F16/BF16, every shape checked against the config.
bert_weights read_bert_weights(const std::filesystem::path& safetensors, const bert_config& config);
/// modules.json + the Pooling module's config.json (1_Pooling/config.json): cls or mean.
pooling_mode read_pooling(const std::filesystem::path& model_dir);

}  // namespace awp::embed
