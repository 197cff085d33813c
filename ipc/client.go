package ipc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/value"
)

// defaultWriteTimeout bounds a request write when the call's context has no
// deadline.
const defaultWriteTimeout = 30 * time.Second

// Client is a connection to the daemon. It is safe for concurrent use:
// calls from many goroutines are pipelined on the one connection and each
// gets its own response, in whatever order the daemon finishes them.
type Client struct {
	c     net.Conn
	limit int
	done  chan struct{} // closed when the connection is dead

	wmu sync.Mutex // guards writes to c

	mu      sync.Mutex // guards next, pending and err
	next    uint64
	pending map[uint64]chan response
	err     error // why the connection died; sticky
}

// Dial connects to the daemon's socket at path. Before anything is sent it
// checks that the server is the user's own: the socket's directory must pass
// [CheckSocketDir] and the process serving it [CheckPeer]; otherwise it
// fails with an error wrapping [ErrUnsafeSocket] that says what it found.
func Dial(ctx context.Context, path string) (*Client, error) {
	if err := CheckSocketDir(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no daemon is listening on %s (start one with \"startlux serve\"): %w", path, err)
		}
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("no daemon is listening on %s (start one with \"startlux serve\"): %w", path, err)
		}
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	if err := CheckPeer(c.(*net.UnixConn)); err != nil {
		c.Close()
		return nil, fmt.Errorf("dial %s: %w", path, err)
	}
	return NewClient(c, DefaultFrameLimit), nil
}

// NewClient runs the protocol over an established connection; frames
// larger than limit are refused in both directions. It checks nothing about
// the peer: [Dial] does.
func NewClient(c net.Conn, limit int) *Client {
	cl := &Client{c: c, limit: limit, done: make(chan struct{}), pending: map[uint64]chan response{}}
	go cl.readLoop()
	return cl
}

// Close closes the connection; calls still waiting fail with [ErrClosed].
func (cl *Client) Close() error {
	cl.fail(ErrClosed)
	return nil
}

// fail marks the connection dead with err (the first reason wins), closes
// it and wakes every waiting call.
func (cl *Client) fail(err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err != nil {
		return
	}
	cl.err = err
	cl.c.Close()
	close(cl.done)
}

// readLoop delivers responses to their calls.
func (cl *Client) readLoop() {
	for {
		body, err := ReadFrame(cl.c, cl.limit)
		if err != nil {
			cl.fail(fmt.Errorf("%w: %v", ErrClosed, err))
			return
		}
		r, err := parseResponse(body)
		if err != nil {
			cl.fail(fmt.Errorf("ipc: bad response from the daemon: %w", err))
			return
		}
		if !r.hasID {
			// The daemon could not read one of our frames; we cannot tell
			// which, so nothing on this connection can be trusted.
			if r.err == nil {
				r.err = api.Errorf(api.CodeInternal, "response without an id")
			}
			cl.fail(fmt.Errorf("ipc: the daemon rejected a frame: %w", r.err))
			return
		}
		cl.mu.Lock()
		ch, ok := cl.pending[r.id]
		delete(cl.pending, r.id)
		cl.mu.Unlock()
		if ok {
			ch <- r // buffered: never blocks
		}
	}
}

// Call sends method with params and waits for the response, decoding its
// result into result (a pointer; *msgpack.RawMessage keeps the bytes as
// they came; nil discards the result). params may be nil, a
// [msgpack.RawMessage] holding one encoded value, or anything [Marshal]
// encodes. A protocol error from the daemon is returned as an [*api.Error]. When
// ctx ends first Call returns ctx's error; the daemon may still finish the
// request, and its response is dropped.
func (cl *Client) Call(ctx context.Context, method string, params, result any) error {
	var raw msgpack.RawMessage
	switch p := params.(type) {
	case nil:
	case msgpack.RawMessage:
		if err := value.CheckMsgpack(p); err != nil {
			return fmt.Errorf("%s: params: %w", method, err)
		}
		raw = p
	default:
		var err error
		if raw, err = Marshal(p); err != nil {
			return fmt.Errorf("%s: encode params: %w", method, err)
		}
	}

	ch := make(chan response, 1)
	cl.mu.Lock()
	if cl.err != nil {
		err := cl.err
		cl.mu.Unlock()
		return err
	}
	cl.next++
	id := cl.next
	cl.pending[id] = ch
	cl.mu.Unlock()
	forget := func() {
		cl.mu.Lock()
		delete(cl.pending, id)
		cl.mu.Unlock()
	}

	body := appendRequest(nil, id, method, raw)
	if len(body) > cl.limit {
		forget()
		return fmt.Errorf("%s: request of %d bytes is over the frame limit of %d", method, len(body), cl.limit)
	}
	if err := cl.write(ctx, body); err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}

	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		return decodeResult(method, r.result, result)
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case <-cl.done:
		// A response may have raced with the failure.
		select {
		case r := <-ch:
			if r.err != nil {
				return r.err
			}
			return decodeResult(method, r.result, result)
		default:
		}
		cl.mu.Lock()
		err := cl.err
		cl.mu.Unlock()
		return fmt.Errorf("%s: %w", method, err)
	}
}

// write sends one frame under the write lock.
func (cl *Client) write(ctx context.Context, body []byte) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultWriteTimeout)
	}
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	err := cl.c.SetWriteDeadline(deadline)
	if err == nil {
		err = WriteFrame(cl.c, body)
	}
	if err != nil {
		// A partial frame leaves the stream unusable.
		err = fmt.Errorf("%w: write: %v", ErrClosed, err)
		cl.fail(err)
	}
	return err
}

// decodeResult decodes a result into the caller's value.
func decodeResult(method string, raw msgpack.RawMessage, result any) error {
	switch r := result.(type) {
	case nil:
		return nil
	case *msgpack.RawMessage:
		*r = raw
		return nil
	}
	if raw == nil {
		raw = msgpack.RawMessage{0xc0}
	}
	if err := Unmarshal(raw, result); err != nil {
		return fmt.Errorf("%s: decode result: %w", method, err)
	}
	return nil
}

// DecodeBatchItem decodes one item of a decide_batch result into resp. An
// item that holds an error instead is returned as its [*api.Error].
func DecodeBatchItem(item msgpack.RawMessage, resp *api.Response) error {
	var failed api.BatchError
	if err := Unmarshal(item, &failed); err == nil && failed.Error != nil {
		return failed.Error
	}
	if err := Unmarshal(item, resp); err != nil {
		return fmt.Errorf("decode a decide_batch item: %w", err)
	}
	return nil
}

// Decide calls decide with params (one request, encoded as Call encodes
// params) and returns the daemon's response.
func (cl *Client) Decide(ctx context.Context, params any) (*api.Response, error) {
	var resp api.Response
	if err := cl.Call(ctx, api.MethodDecide, params, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DecideBatch calls decide_batch with params (an array of requests, or
// {"requests": [...]}, encoded as Call encodes params) and decodes its
// items: resps[i] is the response to request i, or nil where the daemon
// refused it, errs[i] being then its [*api.Error]. err is set, and the
// slices nil, when the call fails or an item cannot be decoded.
func (cl *Client) DecideBatch(ctx context.Context, params any) (resps []*api.Response, errs []error, err error) {
	var res api.BatchResult
	if err := cl.Call(ctx, api.MethodDecideBatch, params, &res); err != nil {
		return nil, nil, err
	}
	resps = make([]*api.Response, len(res.Responses))
	errs = make([]error, len(res.Responses))
	for i, raw := range res.Responses {
		var resp api.Response
		var perr *api.Error
		if err := DecodeBatchItem(raw, &resp); errors.As(err, &perr) {
			errs[i] = perr
		} else if err != nil {
			return nil, nil, fmt.Errorf("response %d: %w", i, err)
		} else {
			resps[i] = &resp
		}
	}
	return resps, errs, nil
}
