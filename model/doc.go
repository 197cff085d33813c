// Package model loads Qwen3.5 dense checkpoints and runs their forward pass
// on a tensor.Backend (qwen35.md is the specification).
//
// Loading reads config.json (bare or with text_config nesting, layer_types or
// full_attention_interval, rope_parameters / rope_scaling / top-level rope
// fields) and the safetensors files (single or sharded), maps them, and keeps
// every weight as a view in its stored dtype: F32, BF16, F16, or MLX
// affine-quantised U32 with scales and biases. Three naming layouts are
// recognised from the tensors themselves: Hugging Face (model.*), the
// multimodal wrapper (model.language_model.*, vision tower ignored) and
// mlx-community (language_model.model.*, norms already shifted by one, conv
// weights [D, K, 1]). MoE checkpoints, YaRN rope and malformed files are
// refused with errors naming the file, the tensor or field, and the problem.
//
// The graph is written once against tensor.Backend, layer by layer as
// qwen35.md §6 gives it: a decoder layer (layer.go) is a mixer, full
// attention (attention.go) or Gated DeltaNet (deltanet.go), and a SwiGLU
// MLP, each around a pre-norm residual; each mixer keeps its own part of a
// State (keys and values, or conv and recurrent state). Config.Tensors lists
// every tensor a checkpoint holds, by logical name, shape and role, from the
// same table the loader binds.
//
// Forward runs several right-padded rows as one batch, each optionally
// after a prefix State (which is only read), and returns the final normed
// hidden states at chosen positions, or their logits against a chosen set of
// LM-head rows; its last layer runs past the mixer only for those positions.
// Prefill turns a prefix into a reusable State (attention K/V, DeltaNet conv
// and recurrent state), and can resume from one; its last layer runs only
// what makes the state.
//
// With LoadOptions.Int8 the large projections become int8 weights at load
// (int8.go), optionally smoothed first from calibration rows run in float
// (smooth.go, SmoothQuant), and the backend runs them as int8 products.
package model
