package decide

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/startlux/startlux/value"
)

// repoTestdata is the repository's testdata directory.
var repoTestdata = filepath.Join("..", "testdata")

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func demoConfig(t testing.TB) *Config {
	t.Helper()
	c, err := ParseConfig(readFile(t, filepath.Join(repoTestdata, "demo-decision", ConfigFile)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// renderCase is one case of render-demo.json, parsed with this package's own
// parser so that float and integer forms survive.
type renderCase struct {
	evidence value.Value
	question Question
	text     string
	ids      []int32
}

func loadRenderCases(t testing.TB) []renderCase {
	t.Helper()
	root, err := value.ParseJSON(readFile(t, filepath.Join(repoTestdata, "goldens", "render-demo.json")))
	if err != nil {
		t.Fatal(err)
	}
	cases, _ := root.Get("cases")
	var out []renderCase
	for i := range cases.Arr {
		c := &cases.Arr[i]
		ev, _ := c.Get("evidence")
		qv, _ := c.Get("question")
		q, err := questionFromValue("q", qv)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		text, _ := c.Get("text")
		idv, _ := c.Get("ids")
		ids := make([]int32, len(idv.Arr))
		for j, x := range idv.Arr {
			var n int32
			if err := json.Unmarshal([]byte(x.Int), &n); err != nil {
				t.Fatal(err)
			}
			ids[j] = n
		}
		out = append(out, renderCase{*ev, q, text.Str, ids})
	}
	if len(out) != 28 {
		t.Fatalf("render-demo.json has %d cases, want 28", len(out))
	}
	return out
}

// rowText renders a case's only row (render-demo rows have at most 25 options).
func rowText(t testing.TB, cfg *Config, ev *value.Value, q *Question) string {
	t.Helper()
	opts, err := q.Options()
	if err != nil {
		t.Fatal(err)
	}
	evs, err := RenderJSON(ev)
	if err != nil {
		t.Fatal(err)
	}
	labels := make([]string, len(opts))
	for i, o := range opts {
		labels[i] = o.Label
	}
	return cfg.renderRow(evs, q.Instructions, labels)
}

func TestRenderDemoText(t *testing.T) {
	cfg := demoConfig(t)
	for i, c := range loadRenderCases(t) {
		if got := rowText(t, cfg, &c.evidence, &c.question); got != c.text {
			t.Errorf("case %d: text differs\n got %q\nwant %q", i, got, c.text)
		}
	}
}

// TestRenderDemoMsgpack sends each case's evidence through msgpack (encoded
// in order, decoded by ParseMsgpack's decoder) and checks the row is the same
// text; evidence with integers beyond 64 bits has no msgpack form.
func TestRenderDemoMsgpack(t *testing.T) {
	cfg := demoConfig(t)
	n := 0
	for i, c := range loadRenderCases(t) {
		mp, err := value.AppendMsgpack(nil, &c.evidence)
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("64 bits")) {
				t.Errorf("case %d: %v", i, err)
			}
			continue
		}
		ev, err := value.ParseMsgpack(mp)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got := rowText(t, cfg, &ev, &c.question); got != c.text {
			t.Errorf("case %d: text differs after msgpack\n got %q\nwant %q", i, got, c.text)
		}
		n++
	}
	if n < 20 {
		t.Errorf("only %d cases went through msgpack", n)
	}
}

func TestMsgpackFloat32Widened(t *testing.T) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	if err := enc.EncodeMapLen(1); err != nil {
		t.Fatal(err)
	}
	_ = enc.EncodeString("x")
	_ = enc.EncodeFloat32(0.1)
	v, err := value.ParseMsgpack(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := RenderJSON(&v)
	// float32(0.1) widened is 0.10000000149011612 (Python: float(numpy.float32(0.1))).
	want := `{"x": 0.10000000149011612}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}
