package api

import "github.com/vmihailenco/msgpack/v5"

// The protocol's methods, in alphabetical order (docs/protocol.md).
const (
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
)

// Methods lists the methods in alphabetical order.
var Methods = [...]string{MethodDecide, MethodDecideBatch, MethodLoad, MethodModels, MethodPing, MethodStatus}

// LoadParams are the load method's params.
type LoadParams struct {
	// Model is a name in the models folder, [DemoName] (or "") for the
	// embedded demo, or an absolute checkpoint directory.
	Model string `json:"model"`
	// Int8, when present, loads the model with int8 projections (true) or
	// float ones (false) and keeps that for later loads; absent, the
	// setting of the model in service applies.
	Int8 *bool `json:"int8,omitempty"`
}

// BatchResult is what decide_batch returns: one item per request, in order,
// each either an encoded decision [Response] or a [BatchError].
type BatchResult struct {
	Responses []msgpack.RawMessage `json:"responses"`
}

// BatchError is a batch item that failed: {"error": {code, message}}.
type BatchError struct {
	Error *Error `json:"error"`
}
