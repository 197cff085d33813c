package api

import (
	"errors"
	"fmt"
)

// Code names a class of failure; it travels as the error's code string so
// clients can switch on it. docs/protocol.md lists what each one means.
type Code string

// The error codes of the protocol. Codes marked "connection closed" end the
// connection after the error frame is sent; all others leave it usable.
const (
	// CodeBadFrame: the frame's body is not exactly one msgpack map.
	CodeBadFrame Code = "bad_frame"
	// CodeFrameTooLarge: the length prefix exceeds the frame limit
	// (connection closed: the stream cannot be resynchronised).
	CodeFrameTooLarge Code = "frame_too_large"
	// CodeBadRequest: the map lacks id or method, or they have wrong types.
	CodeBadRequest Code = "bad_request"
	// CodeUnknownMethod: no such method.
	CodeUnknownMethod Code = "unknown_method"
	// CodeInvalidParams: the method's params are wrong (a bad decision
	// request: wrong field types, unknown question type, duplicate keys...).
	CodeInvalidParams Code = "invalid_params"
	// CodeOverloaded: the daemon's queue is full; retry later.
	CodeOverloaded Code = "overloaded"
	// CodeModelLoadFailed: the model could not be loaded, so decisions cannot
	// be served (or a requested switch failed and the old model stays).
	CodeModelLoadFailed Code = "model_load_failed"
	// CodePullFailed: a load with pull could not download the checkpoint
	// from the Hub (the message says why and what to do); the old model
	// stays.
	CodePullFailed Code = "pull_failed"
	// CodeCanceled: the request was abandoned before it finished (its
	// deadline passed, or the client went away).
	CodeCanceled Code = "canceled"
	// CodeShuttingDown: the daemon is stopping and takes no new requests.
	CodeShuttingDown Code = "shutting_down"
	// CodeInternal: a failure inside the daemon; the message says what.
	CodeInternal Code = "internal"
)

// Error is a protocol error: what a response's error map holds (and a
// failed batch item's "error"), and what ipc's client returns when the
// server answered with one.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error formats the code and message.
func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf returns an [*Error] with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the protocol code of err: its own when err wraps an
// [*Error], [CodeInternal] otherwise.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the message of a protocol error, or err's text when
// err wraps none.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
