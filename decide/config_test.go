package decide

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/startlux/startlux/tokenizer"
)

func TestConfigErrors(t *testing.T) {
	base := readFile(t, filepath.Join(demoDir(), ConfigFile))
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	tok, err := tokenizer.Load(filepath.Join(demoDir(), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"pointer format", edit(func(m map[string]any) { m["format"] = "pointer/1" }), `format "pointer/1" is not supported`},
		{"letters and ids differ in count", edit(func(m map[string]any) { m["letters"] = "ABC" }), "3 letters but 25 letter_token_ids"},
		{"letter id wrong", edit(func(m map[string]any) { m["letter_token_ids"].([]any)[3] = 99 }), `letter 'D' (index 3) tokenises to [35], letter_token_ids says 99`},
		{"letter swapped", edit(func(m map[string]any) { m["letters"] = "ABCDEFGHIJKLMNOPQRSTUVWXZ" }), `letter 'Z' (index 24)`},
		{"letter not one token", edit(func(m map[string]any) { m["letters"] = "ABCDEFGHIJKLMNOPQRSTUVWX€" }), `letter '€' (index 24) tokenises to`},
		{"missing temperature", edit(func(m map[string]any) { delete(m["temperature_by_type"].(map[string]any), "score") }), "temperature_by_type has no score"},
		{"zero temperature", edit(func(m map[string]any) { m["temperature_by_type"].(map[string]any)["noul"] = 0 }), "temperature_by_type.noul = 0"},
		{"group too big", edit(func(m map[string]any) { m["wide_choice"].(map[string]any)["group"] = 26 }), "wide_choice.group = 26"},
		{"keep too big", edit(func(m map[string]any) { m["wide_choice"].(map[string]any)["keep"] = 25 }), "wide_choice.keep = 25"},
		{"bad residual", edit(func(m map[string]any) { m["wide_choice"].(map[string]any)["residual"] = 1.5 }), "wide_choice.residual = 1.5"},
		{"prior of an unknown type", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"rank": map[string]any{"2": []any{0.5, 0.5}}}
		}), "position_prior.rank: unknown question type"},
		{"prior count not a number", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"choice": map[string]any{"two": []any{0.5, 0.5}}}
		}), `position_prior.choice."two": the key must be an option count 2..25`},
		{"prior count too big", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"choice": map[string]any{"26": []any{1.0}}}
		}), `position_prior.choice."26"`},
		{"prior count padded", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"choice": map[string]any{"02": []any{0.5, 0.5}}}
		}), `position_prior.choice."02"`},
		{"prior length", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"score": map[string]any{"3": []any{0.5, 0.5}}}
		}), "position_prior.score.3: 2 probabilities, want 3"},
		{"prior zero", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"noul": map[string]any{"3": []any{0.5, 0.5, 0.0}}}
		}), "position_prior.noul.3[2] = 0: must be positive"},
		{"prior sum", edit(func(m map[string]any) {
			m["position_prior"] = map[string]any{"noul": map[string]any{"3": []any{0.5, 0.4, 0.2}}}
		}), "position_prior.noul.3 sums to 1.1"},
		{"not json", []byte("{"), "decision_config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.data)
			if err == nil {
				err = c.checkLetters(tok, tok.VocabSize())
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// The demo config itself passes.
	c, err := ParseConfig(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.checkLetters(tok, tok.VocabSize()); err != nil {
		t.Fatal(err)
	}
	if c.PositionPrior != nil || c.logPrior(Choice, 4) != nil {
		t.Errorf("the demo config has no position_prior, read %v", c.PositionPrior)
	}
	// A valid prior reads back as written.
	c, err = ParseConfig(edit(func(m map[string]any) {
		m["position_prior"] = map[string]any{"choice": map[string]any{"2": []any{0.25, 0.75}}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if lp := c.logPrior(Choice, 2); len(lp) != 2 || math.Abs(lp[1]-math.Log(0.75)) > 1e-15 || c.logPrior(Choice, 3) != nil || c.logPrior(Noul, 2) != nil {
		t.Errorf("logPrior: %v", lp)
	}
}

// TestTooLongRequests checks the row-length limit names the cause, and that
// nothing runs for a bad request.
func TestTooLongRequests(t *testing.T) {
	e := openDemo(t, Options{})
	ran := 0
	jevfmtOf(e).trace = func(*Request, *Question, []int32, []float32) { ran++ }
	limit := e.Info().MaxPositions
	if limit <= 0 {
		t.Skip("the model has no position limit")
	}
	long := strings.Repeat("word ", limit)
	// A wide question whose first rows fit but whose final row cannot: 30
	// options in two groups of 15, three labels of about limit/4.5 tokens in
	// each group; the final row would show all six.
	unit := float64(len(e.tok.Encode(strings.Repeat("abc ", 100)))) / 100
	longLabel := strings.Repeat("abc ", int(float64(limit)/4.5/unit))
	var wide []string
	for i := 0; i < 30; i++ {
		label := fmt.Sprint("option ", i)
		if i%15 < 3 {
			label = longLabel
		}
		wide = append(wide, fmt.Sprintf("%q: %q", fmt.Sprint("o", i), label))
	}
	tests := []struct {
		name, body, question, field string
	}{
		{"evidence", `{"evidence": "` + long + `", "questions": {"a": {"type": "noul", "instructions": "x"}, "b": {"type": "noul", "instructions": "y"}}}`, "", "evidence"},
		{"one long question", `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": "x"}, "b": {"type": "noul", "instructions": "` + long + `"}}}`, "b", "instructions"},
		{"wide question's later rows", `{"evidence": 1, "questions": {"a": {"type": "noul", "instructions": "x"}, "w": {"type": "choice", "instructions": "x", "criteria": {` + strings.Join(wide, ", ") + `}}}}`, "w", "criteria"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseJSON([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Decide(context.Background(), r)
			var re *RequestError
			if !errors.As(err, &re) || re.Question != tc.question || re.Field != tc.field || !strings.Contains(re.Message, fmt.Sprint(limit)) {
				t.Errorf("got %v, want question %q field %q naming the limit", err, tc.question, tc.field)
			}
			if !IsBadRequest(err) {
				t.Error("IsBadRequest is false")
			}
		})
	}
	if ran != 0 {
		t.Errorf("%d rows ran for bad requests", ran)
	}
}
