package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestTokenizeGolden(t *testing.T) {
	data, err := os.ReadFile("../../testdata/goldens/tokenize-tiny-qwen35.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	var in, want bytes.Buffer
	for _, c := range g.Cases {
		line, _ := json.Marshal(c.Text)
		in.Write(line)
		in.WriteByte('\n')
		ids, _ := json.Marshal(c.IDs)
		if len(c.IDs) == 0 {
			ids = []byte("[]")
		}
		want.Write(ids)
		want.WriteByte('\n')
	}
	var out, errOut bytes.Buffer
	env := &cmdEnv{stdin: &in, stdout: &out, stderr: &errOut}
	if err := run(context.Background(), env, []string{"tokenize", "--tokenizer", "../../testdata/tiny-qwen35/tokenizer.json"}); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	gotLines, wantLines := strings.Split(out.String(), "\n"), strings.Split(want.String(), "\n")
	if len(gotLines) != len(wantLines) {
		t.Fatalf("%d output lines, want %d", len(gotLines), len(wantLines))
	}
	for i := range wantLines {
		if gotLines[i] != wantLines[i] {
			t.Fatalf("line %d: %s, want %s", i+1, gotLines[i], wantLines[i])
		}
	}
}

func TestTokenizeErrors(t *testing.T) {
	tok := "../../testdata/tiny-qwen35/tokenizer.json"
	tests := []struct {
		name  string
		args  []string
		input string
		want  string
		out   string // output written before the error
	}{
		{"no tokenizer flag", nil, "", "--tokenizer is required", ""},
		{"missing file", []string{"--tokenizer", "nope.json"}, "", "nope.json", ""},
		{"extra argument", []string{"--tokenizer", tok, "x"}, "", "unexpected arguments", ""},
		{"not a string", []string{"--tokenizer", tok}, "\"a\"\n42\n", "line 2: want a JSON string", "[64]\n"},
		{"bad JSON", []string{"--tokenizer", tok}, "\"a\"\n\"b\"\n\"c\n", "line 3:", "[64]\n[65]\n"},
		{"blank line", []string{"--tokenizer", tok}, "\"a\"\n\n", "line 2: want a JSON string, got an empty line", "[64]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := &cmdEnv{stdin: strings.NewReader(tt.input), stdout: &out, stderr: &errOut}
			err := run(context.Background(), env, append([]string{"tokenize"}, tt.args...))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
			if out.String() != tt.out {
				t.Errorf("output %q, want %q", out.String(), tt.out)
			}
		})
	}
}

func TestTokenizeNoFinalNewline(t *testing.T) {
	var out bytes.Buffer
	env := &cmdEnv{stdin: strings.NewReader("\"a\"\n\"\""), stdout: &out, stderr: &bytes.Buffer{}}
	if err := run(context.Background(), env, []string{"tokenize", "--tokenizer", "../../testdata/tiny-qwen35/tokenizer.json"}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "[64]\n[]\n" {
		t.Errorf("output %q", out.String())
	}
}
