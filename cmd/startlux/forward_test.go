package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/model/safetensors"
)

// TestForwardCommand runs "startlux forward" on the tiny checkpoint and holds
// its outputs to the transformers goldens.
func TestForwardCommand(t *testing.T) {
	g, err := safetensors.Open("../../testdata/goldens/tiny-qwen35.goldens.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, cs := range []string{"rand5", "rand65"} {
		ids := g.Tensor(cs + ".ids")
		var parts []string
		for i := range ids.Elems() {
			d := ids.Data[4*i:]
			parts = append(parts, fmt.Sprint(int32(uint32(d[0])|uint32(d[1])<<8|uint32(d[2])<<16|uint32(d[3])<<24)))
		}
		out := filepath.Join(t.TempDir(), "f.safetensors")
		var stderr bytes.Buffer
		env := &cmdEnv{stdout: &bytes.Buffer{}, stderr: &stderr}
		if err := runForward(context.Background(), env, []string{"--model", "../../testdata/tiny-qwen35", "--ids", strings.Join(parts, ","), "--out", out, "--backend", "cpu"}); err != nil {
			t.Fatalf("%s: %v (%s)", cs, err, stderr.String())
		}
		f, err := safetensors.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"norm", "logits_last"} {
			got, want := f.Tensor(k), g.Tensor(cs+"."+k)
			if got == nil || fmt.Sprint(got.Shape) != fmt.Sprint(want.Shape) {
				t.Fatalf("%s: %s missing or shaped wrong: %v", cs, k, got)
			}
			a, b := got.Weight().Float32s(), want.Weight().Float32s()
			var d, s float64
			for i := range a {
				d += float64(a[i]-b[i]) * float64(a[i]-b[i])
				s += float64(b[i]) * float64(b[i])
			}
			if r := math.Sqrt(d / s); r > 1e-4 {
				t.Errorf("%s: %s relative error %.2e", cs, k, r)
			}
		}
		f.Close()
	}
	for _, bad := range [][]string{{"--model", "x"}, {"--model", "../../testdata/tiny-qwen35", "--ids", "1,a", "--out", "x"}} {
		if err := runForward(context.Background(), &cmdEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
