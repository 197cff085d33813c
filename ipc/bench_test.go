package ipc

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// BenchmarkRoundTrip measures one call's protocol cost through a real
// socket: framing, the envelope, the handler goroutine and both syscalls.
// The params and result are the size of a typical decision request and
// response.
func BenchmarkRoundTrip(b *testing.B) {
	req, err := FromJSON([]byte(`{"evidence":{"store":"north","items":[{"name":"stapler","qty":7},{"name":"lamp","qty":6}]},` +
		`"questions":{"q0":{"type":"choice","instructions":"Which item has the largest quantity?","criteria":{"lamp":"lamp","stapler":"stapler"}},` +
		`"q1":{"type":"noul","instructions":"Is there any lamp in stock?"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	resp, err := FromJSON([]byte(`{"answers":{"q0":{"options":["lamp","stapler"],"probs":[0.25290125608444214,0.7470987439155579],"answer":"stapler"},` +
		`"q1":{"options":["yes","no","unknown"],"probs":[0.7269561290740967,0.0002027328300755471,0.2728411555290222],"answer":"yes"}},` +
		`"tokens":180,"cached_tokens":52,"elapsed_ms":12.5}`))
	if err != nil {
		b.Fatal(err)
	}
	h := HandlerFunc(func(ctx context.Context, r *Request) (any, error) { return resp, nil })
	path := filepath.Join(privateDir(b), "b.sock")
	l, err := Listen(path)
	if err != nil {
		b.Fatal(err)
	}
	s := NewServer(h, ServerOptions{})
	go s.Serve(l)
	defer func() { s.Shutdown(context.Background()); l.Close() }()
	c, err := Dial(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	b.SetBytes(int64(len(req) + len(resp)))
	b.ResetTimer()
	for range b.N {
		var out msgpack.RawMessage
		if err := c.Call(ctx, "decide", req, &out); err != nil {
			b.Fatal(err)
		}
		if len(out) != len(resp) {
			b.Fatalf("result of %d bytes, want %d", len(out), len(resp))
		}
	}
}
