package decide

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/tokenizer"
)

func chatDir() string { return filepath.Join(repoTestdata, "tiny-qwen35") }

// chatCopy returns a directory with tiny-qwen35's files linked in, less
// those in drop, plus the files of extra written out.
func chatCopy(t *testing.T, extra map[string][]byte, drop ...string) string {
	t.Helper()
	src, err := filepath.Abs(chatDir())
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	for _, e := range ents {
		if _, ok := extra[e.Name()]; ok || contains(drop, e.Name()) {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func openDir(t *testing.T, dir string) (*Engine, error) {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Open(dir, be, Options{})
	if err == nil {
		t.Cleanup(func() { e.Close() })
	}
	return e, err
}

// writtenConfig is the config format.md says a checkpoint without one runs
// with, written out by hand for tiny-qwen35 (whose tokenizer has A..Y at
// ids 32..56), with the given think_block.
func writtenConfig(think string) []byte {
	return []byte(`{"format": "jevfmt/1",
 "system": "You are a careful analyst. Read the evidence, then answer the question with the letter of exactly one option.",
 "letters": "ABCDEFGHIJKLMNOPQRSTUVWXY",
 "letter_token_ids": [32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56],
 "temperature_by_type": {"noul": 1.0, "choice": 1.0, "score": 1.0},
 "wide_choice": {"group": 25, "keep": 3, "residual": 0.001},
 "think_block": "` + think + `"}`)
}

// zeroShotRequests are requests of every question type, a wide question (32
// options, ranked in groups) and a permuted one.
func zeroShotRequests(t *testing.T) []*Request {
	permuted := `{"p": {"type": "choice", "instructions": "Which one?", "criteria": {"a": "apples", "b": "pears", "c": "plums"}, "permute": true},
		"s": {"type": "score", "instructions": "How full?", "criteria": ["empty", "half", "full"]}}`
	return []*Request{pageRequest(t, 1, 12, fourQuestions), pageRequest(t, 2, 3, permuted), pageRequest(t, 3, 40, fourQuestions)}
}

// TestZeroShotEqualsWrittenConfig opens tiny-qwen35, which has no
// decision_config.json, and the same checkpoint with the config the format
// prescribes written out by hand, and checks the derived config is that one
// and every probability agrees; then the same for a chat template without
// think blocks, whose rows must end differently and answer differently.
func TestZeroShotEqualsWrittenConfig(t *testing.T) {
	ctx := context.Background()
	noThink := []byte(`{"chat_template": "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"}`)
	cases := []struct {
		name, think string
		extra       map[string][]byte
	}{
		{"qwen3 template", ThinkEmpty, nil},
		{"template without think blocks", ThinkNone, map[string][]byte{"tokenizer_config.json": noThink}},
	}
	var first []*Response
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			zeroDir := chatDir()
			if c.extra != nil {
				zeroDir = chatCopy(t, c.extra)
			}
			zero, err := openDir(t, zeroDir)
			if err != nil {
				t.Fatal(err)
			}
			writtenFiles := map[string][]byte{ConfigFile: writtenConfig(c.think)}
			for k, v := range c.extra {
				writtenFiles[k] = v
			}
			written, err := openDir(t, chatCopy(t, writtenFiles))
			if err != nil {
				t.Fatal(err)
			}
			if !zero.Info().Derived || written.Info().Derived {
				t.Errorf("Derived: %v without a decision config, %v with one", zero.Info().Derived, written.Info().Derived)
			}
			if !reflect.DeepEqual(zero.Config(), written.Config()) {
				t.Errorf("derived config\n%+v\nwant the written one\n%+v", zero.Config(), written.Config())
			}
			back, err := zero.Config().MarshalFile()
			if err != nil {
				t.Fatal(err)
			}
			if rt, err := ParseConfig(back); err != nil || !reflect.DeepEqual(rt, zero.Config()) {
				t.Errorf("MarshalFile does not read back: %v\n%s", err, back)
			}
			row := zero.Config().renderRow("{}", "?", []string{"a", "b"})
			wantEnd := map[string]string{ThinkEmpty: "<|im_start|>assistant\n<think>\n\n</think>\n\n", ThinkNone: "Answer with one letter.<|im_end|>\n<|im_start|>assistant\n"}[c.think]
			if !strings.HasSuffix(row, wantEnd) {
				t.Errorf("row ends %q, want %q", row[len(row)-60:], wantEnd)
			}
			var got []*Response
			for i, r := range zeroShotRequests(t) {
				a, err := zero.Decide(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				b, err := written.Decide(ctx, r)
				if err != nil {
					t.Fatal(err)
				}
				sameProbs(t, c.name+" request "+string(rune('0'+i)), a, b, 1e-9)
				got = append(got, a)
			}
			if ci == 0 {
				first = got
				return
			}
			differ := false
			for i := range got {
				for j := range got[i].Answers {
					if !reflect.DeepEqual(got[i].Answers[j].Probs, first[i].Answers[j].Probs) {
						differ = true
					}
				}
			}
			if !differ {
				t.Error("the think block changes no probability: it is not in the rows")
			}
		})
	}
}

// TestZeroShotRefusals checks that a checkpoint without a decision config
// whose config cannot be derived is refused, saying why.
func TestZeroShotRefusals(t *testing.T) {
	var tj map[string]any
	if err := json.Unmarshal(readFile(t, filepath.Join(chatDir(), "tokenizer.json")), &tj); err != nil {
		t.Fatal(err)
	}
	// With a prefix space, "Y" is "ĠY", which this vocabulary lacks: two
	// tokens, Ġ and Y (every other letter has its ĠX token).
	for _, p := range tj["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any) {
		if pm := p.(map[string]any); pm["type"] == "ByteLevel" {
			pm["add_prefix_space"] = true
		}
	}
	prefixSpace, _ := json.Marshal(tj)
	tmpl := func(s string) []byte {
		b, _ := json.Marshal(map[string]string{"chat_template": s})
		return b
	}
	cases := []struct {
		name  string
		extra map[string][]byte
		drop  []string
		want  string
	}{
		{"a letter of two tokens", map[string][]byte{"tokenizer.json": prefixSpace}, nil, `letter 'Y' (index 24) tokenises to 2 tokens`},
		{"no chat template", map[string][]byte{"tokenizer_config.json": []byte(`{"eos_token": "<|im_end|>"}`)}, nil, "no chat template"},
		{"thinking only", map[string][]byte{"tokenizer_config.json": tmpl(`{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}`)}, nil, "thinking-only"},
		{"not ChatML", map[string][]byte{"tokenizer_config.json": tmpl(`{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`)}, nil, "does not open with <|im_start|>assistant"},
		{"no tokenizer", nil, []string{"tokenizer.json"}, "no tokenizer.json to derive one from"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := openDir(t, chatCopy(t, c.extra, c.drop...))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "no "+ConfigFile) {
				t.Errorf("got %v, want an error saying there is no %s and %q", err, ConfigFile, c.want)
			}
		})
	}
}

// TestThinkBlockOf reads the generation prompt of both kinds of chat
// template: those that open the assistant turn with an empty think block
// (Qwen3's, from testdata, and Qwen3.5's form, enable_thinking false or by
// default) and those without think blocks; and the ones it refuses.
func TestThinkBlockOf(t *testing.T) {
	var qwen3 struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(readFile(t, filepath.Join(repoTestdata, "qwen3-tokenizer", "tokenizer_config.json")), &qwen3); err != nil {
		t.Fatal(err)
	}
	const loop = `{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endfor %}`
	cases := []struct {
		name, tmpl, want, err string
	}{
		{"qwen3", qwen3.ChatTemplate, ThinkEmpty, ""},
		{"qwen3.5, thinking by default", loop + `
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- else %}
        {{- '<think>\n' }}
    {%- endif %}
{%- endif %}`, ThinkEmpty, ""},
		{"qwen3.5, no thinking by default", loop + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- if enable_thinking is defined and enable_thinking is true %}{{- '<think>\n' }}{%- else %}{{- "<think>\n\n</think>\n\n" }}{%- endif %}{%- endif %}`, ThinkEmpty, ""},
		{"a .jinja file with real newlines", loop + "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n<think>\n\n</think>\n\n' }}{% endif %}", ThinkEmpty, ""},
		{"no think blocks (qwen2.5, instruct-2507)", loop + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`, ThinkNone, ""},
		{"think blocks only in history", `{%- for m in messages %}{%- if m.role == 'assistant' %}{{- '<|im_start|>assistant\n<think>\n\n</think>\n\n' + m.content }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}`, ThinkNone, ""},
		{"thinking only", loop + `{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}`, "", "thinking-only"},
		{"llama", `{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{%- endif %}`, "", "jevfmt/1 is ChatML"},
		{"no generation prompt", loop, "", "no add_generation_prompt block"},
	}
	for _, c := range cases {
		got, err := ThinkBlockOf(c.tmpl)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: got %q, %v; want %q, an error containing %q", c.name, got, err, c.want, c.err)
		}
	}
}

// TestReadChatTemplate checks where the template is read from:
// chat_template.jinja first, then chat_template.json, then
// tokenizer_config.json, whose chat_template may be a list of named ones.
func TestReadChatTemplate(t *testing.T) {
	cases := []struct {
		name        string
		files       map[string]string
		want, from  string
		errContains string
	}{
		{"tokenizer_config string", map[string]string{"tokenizer_config.json": `{"chat_template": "T1"}`}, "T1", "tokenizer_config.json", ""},
		{"tokenizer_config list", map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "T2"}, {"name": "default", "template": "T3"}]}`}, "T3", "tokenizer_config.json", ""},
		{"list without default", map[string]string{"tokenizer_config.json": `{"chat_template": [{"name": "tool_use", "template": "T2"}]}`}, "", "", `no template named "default"`},
		{"jinja wins", map[string]string{"chat_template.jinja": "J", "tokenizer_config.json": `{"chat_template": "T1"}`}, "J", "chat_template.jinja", ""},
		{"chat_template.json", map[string]string{"chat_template.json": `{"chat_template": "C"}`, "tokenizer_config.json": `{}`}, "C", "chat_template.json", ""},
		{"none", map[string]string{"tokenizer_config.json": `{"chat_template": null}`}, "", "", "no chat template"},
		{"bad json", map[string]string{"tokenizer_config.json": `{`}, "", "", "tokenizer_config.json"},
	}
	for _, c := range cases {
		read := func(name string) ([]byte, error) {
			if s, ok := c.files[name]; ok {
				return []byte(s), nil
			}
			return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
		}
		got, from, err := readChatTemplate(read)
		if c.errContains != "" {
			if err == nil || !strings.Contains(err.Error(), c.errContains) {
				t.Errorf("%s: got %q, %v; want an error containing %q", c.name, got, err, c.errContains)
			}
			continue
		}
		if err != nil || got != c.want || from != c.from {
			t.Errorf("%s: got %q from %s, %v; want %q from %s", c.name, got, from, err, c.want, c.from)
		}
	}
}

// TestIsCheckpointZeroShot checks that a chat checkpoint without a decision
// config counts as a checkpoint, and a directory without a tokenizer does
// not.
func TestIsCheckpointZeroShot(t *testing.T) {
	if !IsCheckpoint(chatDir()) {
		t.Error("tiny-qwen35 (config.json, tokenizer.json, no decision config) is not a checkpoint")
	}
	if IsCheckpoint(chatCopy(t, nil, "tokenizer.json")) {
		t.Error("a directory without tokenizer.json or a decision config is a checkpoint")
	}
	if IsCheckpoint(t.TempDir()) {
		t.Error("an empty directory is a checkpoint")
	}
}

// TestDeriveConfigQwen3 derives the config of a checkpoint with the real
// Qwen3 tokenizer and chat template (testdata/qwen3-tokenizer): every
// letter is one token, A..Y at ids 32..56 as in the Qwen vocabulary, and
// the turn opens with an empty think block.
func TestDeriveConfigQwen3(t *testing.T) {
	dir := filepath.Join(repoTestdata, "qwen3-tokenizer")
	zr, err := gzip.NewReader(bytes.NewReader(readFile(t, filepath.Join(dir, "tokenizer.json.gz"))))
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
	c, err := DeriveConfig(tok, read)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range c.LetterTokenIDs {
		if id != 32+i {
			t.Errorf("letter %c: id %d, want %d", DefaultLetters[i], id, 32+i)
		}
	}
	if c.ThinkBlock != ThinkEmpty || c.System != DefaultSystem {
		t.Errorf("think block %q, system %q", c.ThinkBlock, c.System)
	}
}
