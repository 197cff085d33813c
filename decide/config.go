package decide

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Format is the prompt format this package implements.
const Format = "jevfmt/1"

// ConfigFile is the name of the decision config in a checkpoint directory.
const ConfigFile = "decision_config.json"

// Config is a checkpoint's decision_config.json.
type Config struct {
	Format            string             `json:"format"`
	System            string             `json:"system"`
	Letters           string             `json:"letters"`
	LetterTokenIDs    []int              `json:"letter_token_ids"`
	TemperatureByType map[string]float64 `json:"temperature_by_type"`
	WideChoice        WideChoice         `json:"wide_choice"`
	// PositionPrior is the prior over letter positions the readout divides
	// out, by question type and then by the row's option count (a decimal
	// string): PositionPrior["choice"]["4"][j] is the probability the model
	// gives letter j of a four-option choice row whatever the options say.
	// Absent types and counts have none (a uniform prior). See
	// [Config.Logits].
	PositionPrior map[string]map[string][]float64 `json:"position_prior,omitempty"`
	// ThinkBlock is how the assistant turn opens after
	// "<|im_start|>assistant\n": [ThinkEmpty] (also when absent) with an
	// empty think block, as Qwen3 and Qwen3.5 chat templates render a turn
	// without reasoning, or [ThinkNone] with nothing, as chat templates
	// without think blocks do.
	ThinkBlock string `json:"think_block,omitempty"`
}

// The values of [Config.ThinkBlock].
const (
	// ThinkEmpty opens the assistant turn with "<think>\n\n</think>\n\n".
	ThinkEmpty = "empty"
	// ThinkNone opens the assistant turn with nothing.
	ThinkNone = "none"
)

// WideChoice holds the parameters of the wide-choice rule: questions with
// more than Group options are ranked in groups, Keep options of each group
// survive, and the eliminated share Residual of the final probability.
type WideChoice struct {
	Group    int     `json:"group"`
	Keep     int     `json:"keep"`
	Residual float64 `json:"residual"`
}

// ParseConfig reads and checks a decision_config.json.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	return &c, nil
}

func (c *Config) check() error {
	if c.Format != Format {
		return fmt.Errorf("format %q is not supported (this engine reads %s)", c.Format, Format)
	}
	if c.System == "" {
		return fmt.Errorf("system is missing or empty")
	}
	letters := []rune(c.Letters)
	if len(letters) < 2 {
		return fmt.Errorf("letters %q: need at least two", c.Letters)
	}
	if len(letters) != len(c.LetterTokenIDs) {
		return fmt.Errorf("%d letters but %d letter_token_ids", len(letters), len(c.LetterTokenIDs))
	}
	for _, t := range []QuestionType{Noul, Choice, Score} {
		T, ok := c.TemperatureByType[string(t)]
		if !ok {
			return fmt.Errorf("temperature_by_type has no %s", t)
		}
		if !(T > 0) || math.IsInf(T, 0) {
			return fmt.Errorf("temperature_by_type.%s = %v: must be positive and finite", t, T)
		}
	}
	switch c.ThinkBlock {
	case "", ThinkEmpty, ThinkNone:
	default:
		return fmt.Errorf("think_block %q: want %q or %q", c.ThinkBlock, ThinkEmpty, ThinkNone)
	}
	if err := c.checkPrior(len(letters)); err != nil {
		return err
	}
	w := c.WideChoice
	if w.Group < 2 || w.Group > len(letters) {
		return fmt.Errorf("wide_choice.group = %d: must be 2..%d (the letters)", w.Group, len(letters))
	}
	if w.Keep < 1 || w.Keep >= w.Group {
		return fmt.Errorf("wide_choice.keep = %d: must be 1..%d", w.Keep, w.Group-1)
	}
	if !(w.Residual >= 0 && w.Residual < 1) {
		return fmt.Errorf("wide_choice.residual = %v: must be in [0, 1)", w.Residual)
	}
	return nil
}

// priorSumTolerance is how far the probabilities of one position prior may
// sum from 1.
const priorSumTolerance = 1e-6

// checkPrior checks position_prior: known types, option counts 2..letters,
// one positive finite probability per letter, summing to 1.
func (c *Config) checkPrior(letters int) error {
	for typ, byCount := range c.PositionPrior {
		if !knownType(QuestionType(typ)) {
			return fmt.Errorf("position_prior.%s: unknown question type (want noul, choice or score)", typ)
		}
		for key, p := range byCount {
			n, err := strconv.Atoi(key)
			if err != nil || strconv.Itoa(n) != key || n < MinOptions || n > letters {
				return fmt.Errorf("position_prior.%s.%q: the key must be an option count %d..%d", typ, key, MinOptions, letters)
			}
			if len(p) != n {
				return fmt.Errorf("position_prior.%s.%s: %d probabilities, want %d", typ, key, len(p), n)
			}
			var sum float64
			for j, x := range p {
				if !(x > 0) || math.IsInf(x, 0) {
					return fmt.Errorf("position_prior.%s.%s[%d] = %v: must be positive and finite", typ, key, j, x)
				}
				sum += x
			}
			if math.Abs(sum-1) > priorSumTolerance {
				return fmt.Errorf("position_prior.%s.%s sums to %v, want 1", typ, key, sum)
			}
		}
	}
	return nil
}

func knownType(t QuestionType) bool { return t == Noul || t == Choice || t == Score }

// logPrior returns the log of the position prior of a row of n options of
// type t, or nil when the config has none for it.
func (c *Config) logPrior(t QuestionType, n int) []float64 {
	p := c.PositionPrior[string(t)][strconv.Itoa(n)]
	if p == nil {
		return nil
	}
	lp := make([]float64, len(p))
	for j, x := range p {
		lp[j] = math.Log(x)
	}
	return lp
}

// Logits returns the scores the readout turns into probabilities (before
// the temperature) for one row group of n options of type t, from the
// letter logits of its rows: rows[s][j] is the logit of letter j in the row
// that shows the options rotated by s, option (j+s) mod n at letter j. One
// row (s = 0, the order sent) unless the question is permuted. The score of
// option i is the mean over the rows of its letter's logit less the log of
// the position prior at that letter:
//
//	a_i = (1/S) Σ_s ( rows[s][(i−s) mod n] − log π[(i−s) mod n] )
//
// The probabilities are then [Softmax](a, T[type]). Averaging logits equals
// averaging the rows' log-probabilities (each row's normaliser is the same
// for every option); over all n shifts every option meets every letter once,
// so a prior changes nothing for a permuted question.
func (c *Config) Logits(t QuestionType, rows [][]float32) []float64 {
	if len(rows) == 0 {
		return nil
	}
	return rotatedMean(rows, c.logPrior(t, len(rows[0])))
}

// rotatedMean is [Config.Logits] with the log prior given (nil: none).
func rotatedMean(rows [][]float32, logPrior []float64) []float64 {
	n := len(rows[0])
	a := make([]float64, n)
	for s, z := range rows {
		for j, x := range z[:n] {
			v := float64(x)
			if logPrior != nil {
				v -= logPrior[j]
			}
			a[(j+s)%n] += v
		}
	}
	if len(rows) > 1 {
		for i := range a {
			a[i] /= float64(len(rows))
		}
	}
	return a
}

// Encoder is the part of a tokenizer the decision layer uses.
type Encoder interface {
	// Encode returns the token ids of s.
	Encode(s string) []int32
	// EncodeLimit returns the ids of s when it has at most max tokens, and
	// a *tokenizer.LimitError otherwise, tokenising little more than max
	// tokens' worth of s (*tokenizer.Tokenizer's method).
	EncodeLimit(s string, max int) ([]int32, error)
	// MaxTokenBytes returns the most bytes of text one token covers (0:
	// unbounded).
	MaxTokenBytes() int
}

// checkLetters checks that every letter tokenises to exactly one token, the
// one letter_token_ids names, and that the ids fit the vocabulary.
func (c *Config) checkLetters(tok Encoder, vocab int) error {
	for i, l := range []rune(c.Letters) {
		want := c.LetterTokenIDs[i]
		if want < 0 || want >= vocab {
			return fmt.Errorf("%s: letter_token_ids[%d] = %d is outside the vocabulary (%d)", ConfigFile, i, want, vocab)
		}
		got := tok.Encode(string(l))
		if len(got) != 1 || int(got[0]) != want {
			return fmt.Errorf("%s: letter %q (index %d) tokenises to %v, letter_token_ids says %d", ConfigFile, l, i, got, want)
		}
	}
	return nil
}

// renderRow returns the prompt text of one row: the system turn, the
// evidence, the question with one lettered line per label, and the start of
// the assistant turn (with an empty think block unless ThinkBlock is
// [ThinkNone]); the next token is the answer letter.
func (c *Config) renderRow(evidence, instructions string, labels []string) string {
	letters := []rune(c.Letters)
	var b strings.Builder
	b.Grow(len(c.System) + len(evidence) + len(instructions) + 160 + 16*len(labels))
	b.WriteString("<|im_start|>system\n")
	b.WriteString(c.System)
	b.WriteString("<|im_end|>\n<|im_start|>user\nEvidence:\n")
	b.WriteString(evidence)
	b.WriteString("\n\nQuestion: ")
	b.WriteString(instructions)
	b.WriteString("\n")
	for i, l := range labels {
		b.WriteRune(letters[i])
		b.WriteString(". ")
		b.WriteString(l)
		b.WriteString("\n")
	}
	b.WriteString("Answer with one letter.<|im_end|>\n<|im_start|>assistant\n")
	if c.ThinkBlock != ThinkNone {
		b.WriteString("<think>\n\n</think>\n\n")
	}
	return b.String()
}
