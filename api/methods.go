package api

import "github.com/vmihailenco/msgpack/v5"

// The protocol's methods, in alphabetical order (docs/protocol.md).
const (
	// MethodConfigure changes the daemon's settings ([ConfigureParams])
	// and returns its [Status].
	MethodConfigure = "configure"
	// MethodDecide answers one decision [Request] with a [Response].
	MethodDecide = "decide"
	// MethodDecideBatch answers many requests (an array of them, or
	// {"requests": [...]}) with a [BatchResult].
	MethodDecideBatch = "decide_batch"
	// MethodLoad switches the daemon to another model ([LoadParams]) and
	// returns its [Status] once the model serves.
	MethodLoad = "load"
	// MethodModels lists the checkpoints the daemon can load: []
	// [ModelEntry].
	MethodModels = "models"
	// MethodPing answers "pong".
	MethodPing = "ping"
	// MethodStatus returns the daemon's [Status].
	MethodStatus = "status"
	// MethodUnload unloads the daemon's model, handing its memory back,
	// and returns its [Status] once it has (state [StateUnloaded]); the
	// next decision loads the model again.
	MethodUnload = "unload"
)

// Methods lists the methods in alphabetical order.
var Methods = [...]string{MethodConfigure, MethodDecide, MethodDecideBatch, MethodLoad, MethodModels, MethodPing, MethodStatus, MethodUnload}

// LoadParams are the load method's params: a model to load, or a Hub
// repository to pull into the models folder and then load.
type LoadParams struct {
	// Model is a name in the models folder, [DemoName] (or "") for the
	// embedded demo, or an absolute checkpoint directory. It must be empty
	// when Pull is set.
	Model string `json:"model"`
	// Pull is a Hugging Face Hub repository, "owner/name[@revision]", to
	// download into the models folder (as "startlux pull" does) and load;
	// status reports the download as a [LoadProgress] of phase
	// [PhasePulling]. A model already pulled from the same commit is
	// loaded without downloading anything.
	Pull string `json:"pull,omitempty"`
	// Name is the pulled model's name in the models folder (default: the
	// repository's name without its owner); only with Pull.
	Name string `json:"name,omitempty"`
	// Int8, when present, loads the model with int8 projections (true) or
	// float ones (false) and keeps that for later loads; absent, the
	// setting of the model in service applies.
	Int8 *bool `json:"int8,omitempty"`
}

// ConfigureParams are the configure method's params; absent fields leave
// their setting as it is.
type ConfigureParams struct {
	// IdleUnloadS is how long, in seconds, the daemon waits without a
	// decision before it unloads the model (0: never; at most
	// [MaxIdleUnloadS]).
	IdleUnloadS *float64 `json:"idle_unload_s,omitempty"`
}

// MaxIdleUnloadS bounds configure's idle_unload_s: a year, in seconds
// (longer is "never", which is 0).
const MaxIdleUnloadS = 365 * 24 * 3600

// BatchResult is what decide_batch returns: one item per request, in order,
// each either an encoded decision [Response] or a [BatchError].
type BatchResult struct {
	Responses []msgpack.RawMessage `json:"responses"`
}

// BatchError is a batch item that failed: {"error": {code, message}}.
type BatchError struct {
	Error *Error `json:"error"`
}
