package api

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// The states of the daemon's model, as status reports them.
const (
	StateLoading = "loading" // the first model is being read; decisions wait
	StateWarming = "warming" // it is loaded and running warm-up requests; decisions wait
	StateReady   = "ready"   // decisions are served
	StateFailed  = "failed"  // no model could be loaded; decisions fail with model_load_failed
	// StateUnloaded: the model was unloaded (idle, or asked to); the next
	// decision loads it again and waits meanwhile.
	StateUnloaded = "unloaded"
)

// PhasePulling is the [LoadProgress] phase of a load that downloads its
// checkpoint from the Hub first (load with pull); loading and warming
// follow.
const PhasePulling = "pulling"

// Status is what the status method returns.
type Status struct {
	// State is loading, warming, ready, failed or unloaded.
	State string `json:"state"`
	// IdleSince is when the last decision was answered before the model
	// was unloaded (RFC 3339; set only while State is unloaded).
	IdleSince string `json:"idle_since,omitempty"`
	// IdleUnloadS is how long the daemon waits without a decision before
	// it unloads the model, in seconds (0: never).
	IdleUnloadS float64 `json:"idle_unload_s"`
	// Error says why the last load failed ("" when it did not).
	Error string `json:"error,omitempty"`
	// Model describes the model being served (or being loaded first).
	Model ModelStatus `json:"model"`
	// Progress is the loading progress of the first model, or of a model
	// being switched to (nil when nothing loads).
	Progress *LoadProgress `json:"progress,omitempty"`
	// SnapshotBytes and SnapshotLimit are the memory held by kept prefix
	// states and its bound.
	SnapshotBytes int64 `json:"snapshot_bytes"`
	SnapshotLimit int64 `json:"snapshot_limit"`
	// Memory is what the model and the daemon hold, and what the machine
	// has.
	Memory MemoryStatus `json:"memory"`
	// Queued counts decisions waiting for the model.
	Queued int `json:"queued"`
	// TokensInFlight is the tokens of the decisions queued and running,
	// held to Limits.MaxTokensInFlight.
	TokensInFlight int64 `json:"tokens_in_flight"`
	// Limits are the limits requests are held to.
	Limits Limits `json:"limits"`
	// RequestsServed counts decisions answered (errors excluded).
	RequestsServed uint64 `json:"requests_served"`
	// RequestsFailed counts decisions that ended in an error.
	RequestsFailed uint64 `json:"requests_failed"`
	// LatencyP50MS and LatencyP99MS are percentiles of the time from
	// arrival to answer of the last 1024 decisions.
	LatencyP50MS float64 `json:"latency_p50_ms"`
	LatencyP99MS float64 `json:"latency_p99_ms"`
	// UptimeS is how long the daemon has run, in seconds.
	UptimeS float64 `json:"uptime_s"`
	// PID is the daemon's process id.
	PID int `json:"pid"`
}

// MemoryStatus is what the daemon holds and what it may hold, in bytes
// (docs/protocol.md, "Memory").
type MemoryStatus struct {
	// Weights is the resident weights of the model in service.
	Weights int64 `json:"weights"`
	// Cache and CacheLimit are the prefix cache's kept states and their
	// bound (as SnapshotBytes and SnapshotLimit).
	Cache      int64 `json:"cache"`
	CacheLimit int64 `json:"cache_limit"`
	// Scratch and ScratchLimit are the freed activation and scratch
	// buffers the compute backend keeps for reuse, and their bound.
	Scratch      int64 `json:"scratch"`
	ScratchLimit int64 `json:"scratch_limit"`
	// Resident is the daemon process's resident memory in all (0 when it
	// cannot be read).
	Resident int64 `json:"resident"`
	// Available is the memory the machine has for the daemon now: its
	// physical memory less what every process holds, reclaimable caches
	// counted as free (0 when it cannot be read).
	Available int64 `json:"available"`
	// Needs is what the model in service may hold at the limits: its
	// weights, the largest pass, the prefix cache's and the scratch
	// pool's limits. The fit check held it against the machine before the
	// load (0: no check was made).
	Needs int64 `json:"needs"`
	// GPUWorkingSet is the Metal device's recommended working set, which
	// Needs is also held to (0: not on Metal).
	GPUWorkingSet int64 `json:"gpu_working_set,omitempty"`
	// Warning says that the model left less than the margin of the
	// machine's memory free when it was loaded, or why the fit check could
	// not be made.
	Warning string `json:"warning,omitempty"`
	// Note says what the daemon is doing about memory now: that it
	// released the previous model before loading one that would not fit
	// beside it (decisions wait meanwhile).
	Note string `json:"note,omitempty"`
}

// Limits are what the daemon holds requests to (docs/protocol.md, "Limits");
// a request over one is refused with an error naming it.
type Limits struct {
	// MaxQuestions is the most questions of one decision request.
	MaxQuestions int `json:"max_questions"`
	// MaxEvidenceTokens is the most tokens of a request's rendered evidence:
	// the model's position limit.
	MaxEvidenceTokens int `json:"max_evidence_tokens"`
	// MaxRequestTokens bounds the tokens of all the rows a request renders.
	MaxRequestTokens int `json:"max_request_tokens"`
	// MaxValues bounds the values of one request document.
	MaxValues int `json:"max_values"`
	// MaxTokensInFlight bounds the tokens of the decisions queued and
	// running; beyond it requests are refused with overloaded.
	MaxTokensInFlight int64 `json:"max_tokens_in_flight"`
	// MaxQueued is the most decisions queued; beyond it requests are
	// refused with overloaded.
	MaxQueued int `json:"max_queued"`
}

// ModelStatus describes a model.
type ModelStatus struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Backend string `json:"backend"`
	// BackendNote says why the model does not run on the backend asked
	// for, or what went wrong on it: "Metal disabled: attention kernel
	// differs from the CPU by 3.1e-02 at head 2 of token 5" when the GPU
	// failed its check at warm-up or faulted repeatedly and the model runs
	// on the CPU backend instead ("" when nothing did).
	BackendNote string `json:"backend_note,omitempty"`
	// Int8 is whether the model's large projections run as int8 (W8A8)
	// products: the model was loaded with int8 on.
	Int8 bool `json:"int8"`
	// Calibrated is whether the model runs with its own
	// decision_config.json; false for a checkpoint without one, which runs
	// zero-shot with a derived config and whose probabilities are the
	// model's own, not calibrated (clients show [UncalibratedNote]).
	Calibrated bool `json:"calibrated"`
	// Int8Kernel names the backend's int8 kernel ("avx2", "avx512-vnni",
	// "neon-sdot", "mpp-matmul2d") when Int8 is on.
	Int8Kernel string `json:"int8_kernel,omitempty"`
	// Int8Unavailable says why the backend cannot run int8 products (""
	// when it can); a load with int8 on is then refused with that reason.
	Int8Unavailable string `json:"int8_unavailable,omitempty"`
}

// Int8Summary says how the model runs its projections, as status and the
// menu show it: "on (avx2)", "off", or "unavailable — <reason>".
func (m ModelStatus) Int8Summary() string {
	switch {
	case m.Int8:
		return "on (" + m.Int8Kernel + ")"
	case m.Int8Unavailable != "":
		return "unavailable — " + m.Int8Unavailable
	}
	return "off"
}

// UncalibratedNote is what status, the menu and the models listing say of
// a model without a decision_config.json.
const UncalibratedNote = "uncalibrated (run startlux calibrate)"

// LoadProgress reports a load under way.
type LoadProgress struct {
	// Model is the directory being loaded ("" for the embedded demo).
	Model string `json:"model"`
	// Phase is [PhasePulling], loading or warming (the Progress option is
	// also told ready or failed when a load ends).
	Phase string `json:"phase"`
	// Done and Total are bytes of tensors read so far and in all; while
	// pulling, bytes of the checkpoint's files on disk (what an
	// interrupted pull left included) and in all.
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// Repo is the Hub repository being pulled, File the file being
	// fetched, Rate the transfer rate in bytes per second over the last
	// few seconds and ETAS the seconds left at that rate (0: unknown);
	// only while pulling.
	Repo string  `json:"repo,omitempty"`
	File string  `json:"file,omitempty"`
	Rate float64 `json:"rate,omitempty"`
	ETAS float64 `json:"eta_s,omitempty"`
}

// DemoName is the name under which the embedded demo checkpoint is listed
// and loaded.
const DemoName = "demo"

// ModelsDir returns the folder where checkpoints are looked for (the models
// method lists it, load takes names in it, "startlux pull" writes to it):
// ~/Library/Application Support/StartLux/Models on macOS,
// ~/.local/share/startlux/models elsewhere (under $XDG_DATA_HOME when set).
func ModelsDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("models folder: %w", err)
	}
	return modelsDir(runtime.GOOS, home, os.Getenv("XDG_DATA_HOME")), nil
}

func modelsDir(goos, home, xdgData string) string {
	if goos == "darwin" {
		return filepath.Join(home, "Library", "Application Support", "StartLux", "Models")
	}
	if filepath.IsAbs(xdgData) {
		return filepath.Join(xdgData, "startlux", "models")
	}
	return filepath.Join(home, ".local", "share", "startlux", "models")
}

// ModelEntry is one checkpoint the daemon can load.
type ModelEntry struct {
	// Name is the directory's name in the models folder, or [DemoName].
	Name string `json:"name"`
	// Path is the checkpoint directory ("" for the embedded demo).
	Path string `json:"path"`
	// Embedded is true for the demo checkpoint built into the binary.
	Embedded bool `json:"embedded"`
	// Current is true for the model being served.
	Current bool `json:"current"`
	// Source is the Hugging Face Hub repository the model was pulled from
	// ("" when it was not pulled), Revision the revision asked for and
	// Commit the commit it resolved to.
	Source   string `json:"source,omitempty"`
	Revision string `json:"revision,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Bytes is the size of the model's files.
	Bytes int64 `json:"bytes,omitempty"`
	// Quant is how its weights are stored: "bf16", "f16", "f32", "MLX
	// 4-bit (group 64)"; "" when config.json does not say.
	Quant string `json:"quant,omitempty"`
	// Calibrated is whether it has a decision_config.json, whose
	// temperatures its probabilities are read with; a model without one
	// runs zero-shot, uncalibrated ([UncalibratedNote]).
	Calibrated bool `json:"calibrated"`
	// Unloadable says why the model cannot be loaded ("" when it can).
	Unloadable string `json:"unloadable,omitempty"`
}
