package ipc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/api"
)

// echoParams is what the test handler understands.
type echoParams struct {
	Value   int `json:"value"`
	SleepMS int `json:"sleep_ms"`
}

// testHandler echoes, sleeps, blocks until canceled, or fails on request.
type testHandler struct {
	canceled chan string // receives the method of a request whose ctx ended
}

func (h *testHandler) ServeIPC(ctx context.Context, req *Request) (any, error) {
	switch req.Method {
	case "ping":
		return "pong", nil
	case "echo":
		var p echoParams
		if err := Unmarshal(req.Params, &p); err != nil {
			return nil, api.Errorf(api.CodeInvalidParams, "echo: %v", err)
		}
		select {
		case <-time.After(time.Duration(p.SleepMS) * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]int{"value": p.Value}, nil
	case "block":
		<-ctx.Done()
		h.canceled <- req.Method
		return nil, ctx.Err()
	case "fail":
		return nil, errors.New("it broke")
	case "panic":
		panic("boom")
	}
	return nil, api.Errorf(api.CodeUnknownMethod, "no method %q", req.Method)
}

// startServer listens on a fresh socket and serves h; it returns the path.
func startServer(t *testing.T, h Handler, opts ServerOptions) (*Server, string) {
	t.Helper()
	path := filepath.Join(privateDir(t), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(h, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		l.Close()
	})
	return s, path
}

func dial(t *testing.T, path string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// stillServes checks that a fresh client gets answers.
func stillServes(t *testing.T, path string) {
	t.Helper()
	c := dial(t, path)
	var out string
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Call(ctx, "ping", nil, &out); err != nil || out != "pong" {
		t.Fatalf("after that, ping = %q, %v", out, err)
	}
}

func TestClientConcurrentCalls(t *testing.T) {
	_, path := startServer(t, &testHandler{}, ServerOptions{})
	c := dial(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 32*20)
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				v := g*1000 + i
				var out struct {
					Value int `json:"value"`
				}
				if err := c.Call(context.Background(), "echo", echoParams{Value: v, SleepMS: i % 3}, &out); err != nil {
					errs <- err
				} else if out.Value != v {
					errs <- fmt.Errorf("sent %d, got %d", v, out.Value)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// rawConn is a test client speaking frames by hand.
type rawConn struct {
	t *testing.T
	c net.Conn
}

func rawDial(t *testing.T, path string) *rawConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

func (r *rawConn) send(body []byte) {
	r.t.Helper()
	if err := WriteFrame(r.c, body); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one response, or reports that the connection was closed.
func (r *rawConn) recv() (resp response, closed bool) {
	r.t.Helper()
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	body, err := ReadFrame(r.c, DefaultFrameLimit)
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF) {
		return resp, true
	}
	if err != nil {
		r.t.Fatalf("read: %v", err)
	}
	resp, err = parseResponse(body)
	if err != nil {
		r.t.Fatalf("response: %v", err)
	}
	return resp, false
}

// TestPipelinedOutOfOrder sends a slow then a fast request on one connection
// and expects the fast one's response first.
func TestPipelinedOutOfOrder(t *testing.T) {
	_, path := startServer(t, &testHandler{}, ServerOptions{})
	r := rawDial(t, path)
	r.send(appendRequest(nil, 1, "echo", mp(t, map[string]int{"value": 10, "sleep_ms": 300})))
	r.send(appendRequest(nil, 2, "echo", mp(t, map[string]int{"value": 20})))
	var order []uint64
	for range 2 {
		resp, closed := r.recv()
		if closed || resp.err != nil {
			t.Fatalf("closed %v err %v", closed, resp.err)
		}
		var out map[string]int
		if err := msgpack.Unmarshal(resp.result, &out); err != nil {
			t.Fatal(err)
		}
		if want := map[uint64]int{1: 10, 2: 20}[resp.id]; out["value"] != want {
			t.Errorf("id %d answered %d, want %d", resp.id, out["value"], want)
		}
		order = append(order, resp.id)
	}
	if order[0] != 2 || order[1] != 1 {
		t.Errorf("responses came in order %v, want [2 1]", order)
	}
}

// TestBadInput sends each kind of bad input on its own connection and
// checks the answer (an error with the right code, or a closed connection)
// and that the server still serves others afterwards.
func TestBadInput(t *testing.T) {
	h := &testHandler{canceled: make(chan string, 1)}
	_, path := startServer(t, h, ServerOptions{ReadTimeout: 300 * time.Millisecond, FrameLimit: 1 << 20})
	frame := func(b []byte) []byte { return binary.BigEndian.AppendUint32(nil, uint32(len(b))) }
	cases := []struct {
		name       string
		write      []byte
		code       api.Code // "" when the connection must just close
		thenUsable bool     // the same connection answers a ping afterwards
	}{
		{"garbage bytes", []byte("this is not a frame at all, just text\n"), api.CodeFrameTooLarge, false},
		{"oversize length", []byte{0x7f, 0, 0, 0}, api.CodeFrameTooLarge, false},
		{"truncated frame", append(frame(make([]byte, 50)), 1, 2, 3), "", false},
		{"body not msgpack", append(frame([]byte{0xc1, 0xc1}), 0xc1, 0xc1), api.CodeBadFrame, true},
		{"body not a map", append(frame([]byte{0x93, 1, 2, 3}), 0x93, 1, 2, 3), api.CodeBadFrame, true},
		{"unknown method", mustFrame(appendRequest(nil, 5, "frobnicate", nil)), api.CodeUnknownMethod, true},
		{"method wrong type", mustFrame(orderedMap(t, "id", 6, "method", 42)), api.CodeBadRequest, true},
		{"id wrong type", mustFrame(orderedMap(t, "id", "six", "method", "ping")), api.CodeBadRequest, true},
		{"params wrong types", mustFrame(appendRequest(nil, 7, "echo", mp(t, map[string]any{"value": "ten"}))), api.CodeInvalidParams, true},
		{"params malformed", mustFrame(append(orderedMap(t, "id", 8, "method", "echo")[:0:0], append([]byte{0x83}, append(orderedMap(t, "id", 8, "method", "echo")[1:], 0xa6, 'p', 'a', 'r', 'a', 'm', 's', 0xdc, 0, 5)...)...)), api.CodeBadFrame, true},
		{"handler error", mustFrame(appendRequest(nil, 9, "fail", nil)), api.CodeInternal, true},
		{"handler panic", mustFrame(appendRequest(nil, 10, "panic", nil)), api.CodeInternal, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := rawDial(t, path)
			if _, err := r.c.Write(c.write); err != nil {
				t.Fatal(err)
			}
			resp, closed := r.recv()
			switch {
			case c.code == "" && !closed:
				t.Fatalf("got a response %+v, want the connection closed", resp)
			case c.code != "" && closed:
				t.Fatalf("connection closed, want a %s error", c.code)
			case c.code != "" && (resp.err == nil || resp.err.Code != c.code):
				t.Fatalf("response %+v (err %v), want code %s", resp, resp.err, c.code)
			}
			if c.code == api.CodeFrameTooLarge {
				if _, closed := r.recv(); !closed {
					t.Fatalf("connection still open after frame_too_large")
				}
			}
			if c.thenUsable {
				r.send(appendRequest(nil, 99, "ping", nil))
				if resp, closed := r.recv(); closed || resp.id != 99 || resp.err != nil {
					t.Fatalf("same connection then: %+v closed=%v", resp, closed)
				}
			}
			stillServes(t, path)
		})
	}
	t.Run("disconnect mid-request", func(t *testing.T) {
		r := rawDial(t, path)
		r.send(appendRequest(nil, 1, "block", nil))
		time.Sleep(50 * time.Millisecond)
		r.c.Close()
		select {
		case <-h.canceled:
		case <-time.After(5 * time.Second):
			t.Fatal("the handler's context was not canceled when the client left")
		}
		stillServes(t, path)
	})
}

func mustFrame(body []byte) []byte {
	f, err := AppendFrame(nil, body)
	if err != nil {
		panic(err)
	}
	return f
}

func TestCallErrorsAndCancel(t *testing.T) {
	_, path := startServer(t, &testHandler{}, ServerOptions{})
	c := dial(t, path)
	err := c.Call(context.Background(), "nope", nil, nil)
	var perr *api.Error
	if !errors.As(err, &perr) || perr.Code != api.CodeUnknownMethod {
		t.Fatalf("unknown method: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.Call(ctx, "echo", echoParams{SleepMS: 2000}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow call: %v, want deadline exceeded", err)
	}
	var out string
	if err := c.Call(context.Background(), "ping", nil, &out); err != nil || out != "pong" {
		t.Fatalf("after a canceled call: %q %v", out, err)
	}
	if err := c.Call(context.Background(), "echo", msgpack.RawMessage{0x92, 0x01}, nil); err == nil {
		t.Fatal("malformed raw params were sent")
	}
	c.Close()
	if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

func TestPeerRefused(t *testing.T) {
	_, path := startServer(t, &testHandler{}, ServerOptions{AllowPeer: func(int) bool { return false }})
	c := dial(t, path)
	if err := c.Call(context.Background(), "ping", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call from a refused peer: %v, want ErrClosed", err)
	}
}

func TestShutdownFinishesInFlight(t *testing.T) {
	path := filepath.Join(privateDir(t), "s.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := NewServer(&testHandler{}, ServerOptions{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	c := dial(t, path)

	slow := make(chan error, 1)
	go func() {
		var out map[string]int
		err := c.Call(context.Background(), "echo", echoParams{Value: 5, SleepMS: 300}, &out)
		if err == nil && out["value"] != 5 {
			err = fmt.Errorf("got %v", out)
		}
		slow <- err
	}()
	time.Sleep(100 * time.Millisecond)
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	err = c.Call(context.Background(), "ping", nil, nil)
	if api.ErrorCode(err) != api.CodeShuttingDown {
		t.Errorf("call during shutdown: %v, want shutting_down", err)
	}
	if err := <-slow; err != nil {
		t.Errorf("in-flight call during shutdown: %v", err)
	}
	if err := <-shut; err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// TestBytesInFlight: frames that would pass MaxBytesInFlight wait, unread,
// until handlers holding the bytes finish.
func TestBytesInFlight(t *testing.T) {
	arrived := make(chan int, 4)
	release := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, req *Request) (any, error) {
		var p struct {
			N   int    `json:"n"`
			Pad string `json:"pad"`
		}
		if err := Unmarshal(req.Params, &p); err != nil {
			return nil, err
		}
		arrived <- p.N
		<-release
		return p.N, nil
	})
	_, path := startServer(t, h, ServerOptions{FrameLimit: 1 << 20, MaxBytesInFlight: 1 << 20})
	pad := strings.Repeat("x", 600<<10)
	results := make(chan error, 2)
	for n := range 2 {
		c := dial(t, path)
		go func() {
			var got int
			err := c.Call(context.Background(), "hold", map[string]any{"n": n, "pad": pad}, &got)
			if err == nil && got != n {
				err = fmt.Errorf("got %d, want %d", got, n)
			}
			results <- err
		}()
		if n == 0 {
			if got := <-arrived; got != 0 {
				t.Fatalf("first handled: %d", got)
			}
		}
	}
	select {
	case n := <-arrived:
		t.Fatalf("request %d was read while the first held the bytes", n)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if got := <-arrived; got != 1 {
		t.Fatalf("second handled: %d", got)
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
}

// TestHalfClose: a client that sends its requests and closes its writing
// side still gets every answer; one that closes altogether has its running
// requests canceled.
func TestHalfClose(t *testing.T) {
	h := &testHandler{canceled: make(chan string, 1)}
	_, path := startServer(t, h, ServerOptions{})
	r := rawDial(t, path)
	for id := range 3 {
		p, err := Marshal(echoParams{Value: id, SleepMS: 150})
		if err != nil {
			t.Fatal(err)
		}
		r.send(appendRequest(nil, uint64(id), "echo", p))
	}
	if err := r.c.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := map[uint64]bool{}
	for range 3 {
		resp, closed := r.recv()
		if closed || resp.err != nil {
			t.Fatalf("after a half-close: closed %v, error %v", closed, resp.err)
		}
		got[resp.id] = true
	}
	if len(got) != 3 {
		t.Errorf("answers to %v, want ids 0, 1, 2", got)
	}
	if _, closed := r.recv(); !closed {
		t.Error("the connection stayed open once every answer was sent")
	}

	// Gone altogether: the running request is canceled.
	g := rawDial(t, path)
	g.send(appendRequest(nil, 1, "block", nil))
	time.Sleep(50 * time.Millisecond)
	g.c.Close()
	select {
	case m := <-h.canceled:
		if m != "block" {
			t.Errorf("canceled %q", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request of a client that went away was not canceled")
	}
}
