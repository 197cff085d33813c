package ipc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sync/semaphore"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/value"
)

// Handler answers requests. ServeIPC is called on its own goroutine for
// every request, concurrently with others of the same connection; ctx ends
// when the client goes away or the server is stopped hard. The result is
// encoded with msgpack (struct fields by their msgpack tag, else their json
// tag); a [msgpack.RawMessage] result is sent as it is. An error that wraps
// an [*api.Error] is sent with its code; a context error as [api.CodeCanceled]; any
// other as [api.CodeInternal].
type Handler interface {
	ServeIPC(ctx context.Context, req *Request) (any, error)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(ctx context.Context, req *Request) (any, error)

// ServeIPC calls f.
func (f HandlerFunc) ServeIPC(ctx context.Context, req *Request) (any, error) { return f(ctx, req) }

// ServerOptions tunes a [Server]; zero fields take the defaults.
type ServerOptions struct {
	// FrameLimit is the largest frame body read or written (default
	// [DefaultFrameLimit]).
	FrameLimit int
	// ReadTimeout is how long the rest of a frame may take once its first
	// byte arrived (default 30s); a client that stalls mid-frame is cut off.
	ReadTimeout time.Duration
	// WriteTimeout bounds each response write (default 30s); a client that
	// stops reading is cut off.
	WriteTimeout time.Duration
	// IdleTimeout closes a connection that sends nothing for this long
	// between frames; zero keeps idle connections open (a menu-bar app holds
	// one for its lifetime).
	IdleTimeout time.Duration
	// MaxInFlight is how many requests of one connection may be handled at
	// once (default 256); beyond it the server stops reading that connection
	// until one finishes.
	MaxInFlight int
	// MaxBytesInFlight bounds the bytes of the request frames being read
	// and handled, across connections (default 4 × FrameLimit, and never
	// below FrameLimit): a frame that would pass it waits, its connection
	// unread, until handlers finish. Together with the frame limit it bounds
	// the memory requests take before their handlers see them.
	MaxBytesInFlight int64
	// AllowPeer decides whether a peer uid may connect; nil allows only the
	// server's own uid.
	AllowPeer func(uid int) bool
	// Logger receives connection-level events; nil discards them.
	Logger *slog.Logger
}

func (o *ServerOptions) fill() {
	if o.FrameLimit <= 0 {
		o.FrameLimit = DefaultFrameLimit
	}
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 30 * time.Second
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = 256
	}
	if o.MaxBytesInFlight <= 0 {
		o.MaxBytesInFlight = 4 * int64(o.FrameLimit)
	}
	o.MaxBytesInFlight = max(o.MaxBytesInFlight, int64(o.FrameLimit))
	if o.AllowPeer == nil {
		own := os.Getuid()
		o.AllowPeer = func(uid int) bool { return uid == own }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Server serves the protocol on Unix socket listeners: it reads frames,
// runs each request's handler on its own goroutine (several in flight per
// connection; responses go out as they finish, matched by id) and writes the
// responses.
type Server struct {
	h    Handler
	opts ServerOptions

	shutting atomic.Bool         // set once, under mu
	bytes    *semaphore.Weighted // MaxBytesInFlight

	mu        sync.Mutex // guards listeners, conns, active and idle
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	active    int           // requests being handled, across connections
	idle      chan struct{} // closed when active drops to zero during Shutdown
}

// begin counts a request in, unless the server is shutting down.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		return false
	}
	s.active++
	return true
}

// end counts a request out.
func (s *Server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// NewServer returns a server that answers requests with h.
func NewServer(h Handler, opts ServerOptions) *Server {
	opts.fill()
	return &Server{
		h:         h,
		opts:      opts,
		bytes:     semaphore.NewWeighted(opts.MaxBytesInFlight),
		listeners: map[net.Listener]struct{}{},
		conns:     map[*serverConn]struct{}{},
	}
}

// errServerClosed is what Serve's accept returns after Shutdown.
var errServerClosed = errors.New("ipc: server closed")

// Serve accepts connections on l until [Server.Shutdown] is called (then it
// returns nil) or accepting fails for good. Connections from a peer whose uid
// is not allowed are closed at once.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		return errServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Accept()
		if err != nil {
			if s.shutting.Load() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				s.opts.Logger.Warn("accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				backoff = min(2*backoff, time.Second)
				continue
			}
			return fmt.Errorf("serve: accept: %w", err)
		}
		backoff = 5 * time.Millisecond
		s.start(c)
	}
}

// isTemporary reports whether an accept error is worth retrying (out of file
// descriptors and the like).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// start checks the peer and runs a connection.
func (s *Server) start(c net.Conn) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		s.opts.Logger.Warn("refusing a connection that is not a Unix socket", "remote", c.RemoteAddr())
		c.Close()
		return
	}
	uid, err := PeerUID(uc)
	if err != nil || !s.opts.AllowPeer(uid) {
		s.opts.Logger.Warn("refusing a connection from another user", "peer_uid", uid, "err", err)
		c.Close()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &serverConn{s: s, c: uc, uid: uid, ctx: ctx, cancel: cancel, sem: make(chan struct{}, s.opts.MaxInFlight)}
	s.mu.Lock()
	if s.shutting.Load() {
		s.mu.Unlock()
		cancel()
		c.Close()
		return
	}
	s.conns[sc] = struct{}{}
	sc.readerDone = make(chan struct{})
	s.mu.Unlock()
	go sc.serve()
}

// Shutdown stops the server gracefully: it stops accepting, answers requests
// that arrive from now on with [api.CodeShuttingDown], waits for the requests
// already being handled to finish and their responses to be written, then
// closes every connection. If ctx ends first, running handlers are canceled,
// connections closed, and ctx's error returned.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shutting.Store(true)
	for l := range s.listeners {
		l.Close()
	}
	done := make(chan struct{})
	if s.active == 0 {
		close(done)
	} else {
		s.idle = done
	}
	s.mu.Unlock()

	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("shutdown: %w", ctx.Err())
	}
	s.mu.Lock()
	conns := make([]*serverConn, 0, len(s.conns))
	for sc := range s.conns {
		conns = append(conns, sc)
	}
	s.mu.Unlock()
	for _, sc := range conns {
		sc.cancel()
		sc.c.Close()
	}
	for _, sc := range conns {
		<-sc.readerDone
	}
	return err
}

// serverConn is one client connection.
type serverConn struct {
	s          *Server
	c          *net.UnixConn
	uid        int
	ctx        context.Context // ends when the client goes away
	cancel     context.CancelFunc
	sem        chan struct{} // one slot per request in flight
	readerDone chan struct{}

	wmu sync.Mutex // guards writes to c and werr
	// werr is sticky: after one failed write the connection is dead.
	werr error
}

// serve reads and dispatches requests until the connection ends.
func (sc *serverConn) serve() {
	s := sc.s
	var handlers sync.WaitGroup
	defer func() {
		sc.cancel() // the client is gone (or misbehaved): drop its work
		handlers.Wait()
		sc.c.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		close(sc.readerDone)
	}()
	for {
		body, err := sc.readFrame()
		held := int64(len(body)) // of s.bytes, given back when the request is done
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) {
				sc.write(appendResponse(nil, 0, false, nil, api.Errorf(api.CodeFrameTooLarge, "%v", err)))
				sc.linger()
			} else if errors.Is(err, io.EOF) {
				sc.drain(&handlers)
			} else if !errors.Is(err, net.ErrClosed) {
				s.opts.Logger.Info("connection dropped", "err", err)
			}
			return
		}
		req, hasID, perr := parseRequest(body)
		if perr != nil {
			s.bytes.Release(held)
			sc.write(appendResponse(nil, req.ID, hasID, nil, perr))
			continue
		}
		if !s.begin() {
			s.bytes.Release(held)
			sc.write(appendResponse(nil, req.ID, true, nil, api.Errorf(api.CodeShuttingDown, "the daemon is shutting down")))
			continue
		}
		req.PeerUID = sc.uid
		select {
		case sc.sem <- struct{}{}:
		case <-sc.ctx.Done():
			s.bytes.Release(held)
			s.end()
			return
		}
		handlers.Add(1)
		go func() {
			defer func() { s.bytes.Release(held); <-sc.sem; handlers.Done(); s.end() }()
			sc.handle(&req)
		}()
	}
}

// drain is what follows the client's end of stream between frames: it has
// sent all it will, but a client that only half-closed its side still reads
// the answers, so its requests go on until they are answered, unless the
// client turns out to be gone altogether (then they are dropped, as for any
// connection that closes).
func (sc *serverConn) drain(handlers *sync.WaitGroup) {
	done := make(chan struct{})
	go func() {
		handlers.Wait()
		close(done)
	}()
	tick := time.NewTicker(drainProbe)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			if sc.peerGone() {
				return
			}
		}
	}
}

// drainProbe is how often a half-closed connection is checked for a client
// that went away.
const drainProbe = 100 * time.Millisecond

// peerGone reports whether the client closed its end altogether: a write
// of no bytes fails with EPIPE then (on Linux and macOS), and succeeds after
// a half-close.
func (sc *serverConn) peerGone() bool {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.werr != nil {
		return true
	}
	if err := sc.c.SetWriteDeadline(time.Now().Add(sc.s.opts.WriteTimeout)); err != nil {
		return true
	}
	_, err := sc.c.Write(nil)
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, net.ErrClosed)
}

// linger half-closes the connection and drains what the client still
// sends for a moment, so that closing does not reset the connection before
// the client has read the error just written.
func (sc *serverConn) linger() {
	_ = sc.c.CloseWrite()
	_ = sc.c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	_, _ = io.CopyN(io.Discard, sc.c, 1<<20)
}

// readFrame reads one frame, giving the whole frame ReadTimeout from its
// first byte and the wait for that byte IdleTimeout (if any).
func (sc *serverConn) readFrame() ([]byte, error) {
	o := &sc.s.opts
	var idle time.Time
	if o.IdleTimeout > 0 {
		idle = time.Now().Add(o.IdleTimeout)
	}
	if err := sc.c.SetReadDeadline(idle); err != nil {
		return nil, err
	}
	var first [1]byte
	if _, err := io.ReadFull(sc.c, first[:]); err != nil {
		return nil, err
	}
	if err := sc.c.SetReadDeadline(time.Now().Add(o.ReadTimeout)); err != nil {
		return nil, err
	}
	r := io.MultiReader(bytes.NewReader(first[:]), sc.c)
	n, err := readHeader(r, o.FrameLimit)
	if err != nil {
		return nil, truncated(err)
	}
	// Wait for room among the bytes in flight, then give the body its
	// time again: the wait is ours, not the client's.
	if err := sc.s.bytes.Acquire(sc.ctx, int64(n)); err != nil {
		return nil, err
	}
	if err := sc.c.SetReadDeadline(time.Now().Add(o.ReadTimeout)); err != nil {
		sc.s.bytes.Release(int64(n))
		return nil, err
	}
	body, err := readBody(r, n)
	if err != nil {
		sc.s.bytes.Release(int64(n))
		return nil, err
	}
	return body, nil
}

// handle runs one request and writes its response.
func (sc *serverConn) handle(req *Request) {
	res, err := sc.callHandler(req)
	var out []byte
	if err != nil {
		out = appendResponse(nil, req.ID, true, nil, toProtocolError(err))
	} else if raw, eerr := encodeResult(res); eerr != nil {
		out = appendResponse(nil, req.ID, true, nil, api.Errorf(api.CodeInternal, "encode %s result: %v", req.Method, eerr))
	} else {
		out = appendResponse(nil, req.ID, true, raw, nil)
	}
	if len(out) > sc.s.opts.FrameLimit {
		out = appendResponse(nil, req.ID, true, nil, api.Errorf(api.CodeInternal,
			"the %s result is %d bytes, over the frame limit of %d", req.Method, len(out), sc.s.opts.FrameLimit))
	}
	sc.write(out)
}

// callHandler runs the handler, turning a panic into an internal error so
// one bad request cannot take the daemon down.
func (sc *serverConn) callHandler(req *Request) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			sc.s.opts.Logger.Error("handler panicked", "method", req.Method, "panic", p)
			res, err = nil, api.Errorf(api.CodeInternal, "%s: panic: %v", req.Method, p)
		}
	}()
	return sc.s.h.ServeIPC(sc.ctx, req)
}

// toProtocolError maps a handler's error to the one sent.
func toProtocolError(err error) *api.Error {
	var e *api.Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return api.Errorf(api.CodeCanceled, "%v", err)
	default:
		return api.Errorf(api.CodeInternal, "%v", err)
	}
}

// encodeResult encodes a handler's result.
func encodeResult(v any) (msgpack.RawMessage, error) {
	switch r := v.(type) {
	case msgpack.RawMessage:
		if r == nil {
			return nil, nil
		}
		return r, value.CheckMsgpack(r)
	case nil:
		return nil, nil
	}
	return Marshal(v)
}

// Marshal encodes v the way results and params travel: struct fields by
// their msgpack tag, else their json tag, integers in their shortest form.
func Marshal(v any) (msgpack.RawMessage, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.SetCustomStructTag("json")
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unmarshal decodes data into v, matching struct fields by their msgpack
// tag, else their json tag.
func Unmarshal(data []byte, v any) error {
	dec := msgpack.NewDecoder(bytes.NewReader(data))
	dec.SetCustomStructTag("json")
	return dec.Decode(v)
}

// write sends one response frame; a failed write kills the connection.
func (sc *serverConn) write(frame []byte) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if sc.werr != nil {
		return
	}
	err := sc.c.SetWriteDeadline(time.Now().Add(sc.s.opts.WriteTimeout))
	if err == nil {
		err = WriteFrame(sc.c, frame)
	}
	if err != nil {
		sc.werr = err
		sc.cancel()
		sc.c.Close()
	}
}
