package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/text/unicode/norm"
)

// The pipeline stages of tokenizer.json around the BPE model: normalizer,
// pre-tokenizer, post-processor and decoder, each read from its JSON
// component and refused by name when this package does not implement it.

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return unicodeNorm{norm.NFC, newClasses()}, nil
	case "NFD":
		return unicodeNorm{form: norm.NFD}, nil
	case "NFKC":
		return unicodeNorm{form: norm.NFKC}, nil
	case "NFKD":
		return unicodeNorm{form: norm.NFKD}, nil
	case "Sequence":
		var seq normSequence
		for i, sub := range c.Normalizers {
			n, err := parseNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("sequence item %d: %w", i, err)
			}
			if n != nil {
				seq = append(seq, n)
			}
		}
		if len(seq) == 0 {
			return nil, nil
		}
		return seq, nil
	}
	return nil, fmt.Errorf("unsupported normalizer type %q (supported: NFC, NFD, NFKC, NFKD, Sequence)", c.Type)
}

// parsePreTokenizer accepts Split pre-tokenizers followed by one ByteLevel,
// alone or in a Sequence.
func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	var p preTokenizer
	if isNull(raw) {
		return p, errors.New("missing: a byte-level BPE needs a ByteLevel pre-tokenizer")
	}
	var top componentJSON
	if err := json.Unmarshal(raw, &top); err != nil {
		return p, err
	}
	items := []json.RawMessage{raw}
	if top.Type == "Sequence" {
		items = top.Pretokenizers
	}
	var splits []*splitStage
	sawByteLevel := false
	for i, item := range items {
		var c componentJSON
		if err := json.Unmarshal(item, &c); err != nil {
			return p, fmt.Errorf("item %d: %w", i, err)
		}
		if sawByteLevel {
			return p, fmt.Errorf("item %d (%s) comes after ByteLevel; only Split pre-tokenizers before one ByteLevel are supported", i, c.Type)
		}
		switch c.Type {
		case "Split":
			st, err := parseSplit(&c)
			if err != nil {
				return p, fmt.Errorf("item %d: %w", i, err)
			}
			splits = append(splits, st)
			p.stages = append(p.stages, st)
		case "ByteLevel":
			sawByteLevel = true
			if c.AddPrefixSpace {
				p.stages = append(p.stages, prefixSpaceStage{})
			}
			if c.UseRegex == nil || *c.UseRegex { // Hugging Face's default is true
				m, err := newMatcher(gpt2Pattern, false)
				if err != nil {
					return p, err
				}
				p.stages = append(p.stages, &splitStage{m: m, behavior: behaviorIsolated})
			}
		default:
			return p, fmt.Errorf("unsupported pre-tokenizer type %q (supported: Split, ByteLevel, Sequence of them)", c.Type)
		}
	}
	if !sawByteLevel {
		return p, errors.New("no ByteLevel pre-tokenizer: only byte-level BPE is supported")
	}
	if len(p.stages) == 1 && len(splits) == 1 {
		if qm, ok := splits[0].m.(*qwenMatcher); ok && splits[0].behavior == behaviorIsolated && !splits[0].invert {
			p.fast = qm
		}
	}
	return p, nil
}

func parseSplit(c *componentJSON) (*splitStage, error) {
	if c.Pattern == nil {
		return nil, errors.New("split without a pattern")
	}
	var m matcher
	var err error
	switch {
	case c.Pattern.Regex != nil:
		m, err = newMatcher(*c.Pattern.Regex, false)
	case c.Pattern.String != nil:
		m, err = newMatcher(*c.Pattern.String, true)
	default:
		return nil, errors.New(`split pattern is neither {"Regex": ...} nor {"String": ...}`)
	}
	if err != nil {
		return nil, err
	}
	b, err := parseBehavior(c.Behavior)
	if err != nil {
		return nil, err
	}
	return &splitStage{m: m, behavior: b, invert: c.Invert}, nil
}

// checkPostProcessor accepts the post-processors that add nothing to the ids.
func checkPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.Type == "ByteLevel" {
		return nil // only adjusts offsets
	}
	return fmt.Errorf("unsupported post-processor type %q (supported: none, ByteLevel)", c.Type)
}

// parseDecoder reports whether the decoder is ByteLevel (else there is none).
func parseDecoder(raw json.RawMessage) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, err
	}
	if c.Type == "ByteLevel" {
		return true, nil
	}
	return false, fmt.Errorf("unsupported decoder type %q (supported: none, ByteLevel)", c.Type)
}
