// Package decide turns decision requests into calibrated probabilities with a
// jevfmt/1 checkpoint: it validates requests read into order-preserving value
// trees (package value; the order of every object's keys kept), renders one prompt row per question, plans shared
// prefixes (the preamble computed at load, a request's common evidence prefix
// kept in a byte-bounded snapshot store), runs the rows in padded batches and
// reads the answer letter's logits, applying the per-type temperature, the
// config's position prior (if any) and the wide-choice rule of the format. A
// question sent with permute runs every cyclic shift of its options as extra
// rows of the same pass, its per-option logits averaged ([Config.Logits]).
//
// The same engine serves the pointer/1 family (a Qwen3.5 base with a LoRA
// adapter merged at load and a pointer head): each request's state (system
// turn and evidence) runs once into a kept prefix state, each question's
// branch runs as a padded row from it, and the head scores every option at
// its own position (up to [MaxPointerOptions] options, no letters). The
// checkpoint's decision_config.json format picks the family.
//
// The engine is one struct of what the families share (engine.go: the
// tokenizer, the model, the preamble, the snapshot store, the limits, and
// the one open that sniffs the format) and a family behind an interface
// (batch.go), one file each: jevfmt.go and pointer.go. [CheckCheckpoint]
// says whether a directory is a checkpoint at all.
//
// The front of the package is small: [ParseJSON] or [Read] (of a value tree)
// make a [Request], [Open] and [OpenFS] make an [Engine], and [Engine.Decide] or
// [Engine.DecideBatch] answer with a [Response]. Every problem with a request
// is a [*RequestError] naming the question and field.
package decide
