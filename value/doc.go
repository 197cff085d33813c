// Package value is StartLux's order-preserving value tree and its two
// encodings: a [Value] is a JSON value whose objects keep their keys in the
// order received and whose integers keep every digit, read from and
// written to JSON ([ParseJSON], [AppendJSON]) and msgpack ([ParseMsgpack],
// [AppendMsgpack]) under one set of limits ([MaxDepth], [MaxValues]).
//
// A decision request is such a tree: its evidence renders into the prompt
// key by key, so nothing between the client and the renderer may reorder
// or reformat it. The daemon's socket protocol decodes a frame's params
// into a tree once (package ipc, through [Scanner]); package decide works
// on the tree and knows neither encoding.
//
// The readers are strict: a duplicate key, a map key that is not a string,
// invalid UTF-8 in a string, msgpack binary data or extension types, more
// than [MaxValues] values or nesting deeper than [MaxDepth] are errors, each
// an [*Error] naming where in the document it is. JSON also reads the NaN,
// Infinity and -Infinity literals Python writes, as non-finite floats, so
// that a caller can name them; no writer writes them.
//
// The package imports no other package of the module.
package value

// The limits of every document read.
const (
	// MaxDepth bounds the nesting of arrays and objects in one document (a
	// request, or a frame's params, which sit one level below the frame's
	// own map): a hostile document of a few bytes a level could otherwise
	// exhaust the stack of whoever walks it.
	MaxDepth = 128
	// MaxValues bounds the values (strings, numbers, keys' values, ...) of
	// one document: a tree node costs some 100 bytes, so this keeps a parsed
	// document near 100 MB whatever its bytes hold.
	MaxValues = 1 << 20
)
