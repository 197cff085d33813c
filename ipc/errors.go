package ipc

import "errors"

// Sentinel errors of the package.
var (
	// ErrFrameTooLarge is returned when a length prefix exceeds the limit.
	ErrFrameTooLarge = errors.New("ipc: frame too large")
	// ErrClosed is returned by calls on a closed [Client].
	ErrClosed = errors.New("ipc: connection closed")
	// ErrDaemonRunning is returned by [Listen] when another daemon already
	// serves on the socket.
	ErrDaemonRunning = errors.New("ipc: another daemon is serving on the socket")
	// ErrUnsafeSocket is returned by [Dial] (and [CheckSocketDir],
	// [CheckPeer]) when the socket could be another user's: its directory is
	// not the user's own private one, or the process serving it runs as
	// someone else.
	ErrUnsafeSocket = errors.New("ipc: refusing an unsafe socket")
)
