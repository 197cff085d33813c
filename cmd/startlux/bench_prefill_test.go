package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestBenchPrefillFlags(t *testing.T) {
	for _, args := range [][]string{{"--quant", "7"}, {"--tokens", "0"}, {"extra"}} {
		err := run(context.Background(), &cmdEnv{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, append([]string{"bench", "prefill"}, args...))
		if err == nil || strings.Contains(err.Error(), "panic") {
			t.Errorf("%v: %v", args, err)
		}
	}
}
