package decide

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
}

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
// the assistant turn; the next token is the answer letter.
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
	b.WriteString("Answer with one letter.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
	return b.String()
}
