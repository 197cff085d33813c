// Package tokenizer reads a Hugging Face tokenizer.json holding a byte-level
// BPE model (the GPT-2 / Qwen family) and encodes text to token ids and back,
// with the same ids as Hugging Face tokenizers.
//
// What is supported: a BPE model (merges as "a b" strings or ["a", "b"]
// pairs), the NFC/NFD/NFKC/NFKD normalizers (alone or in a Sequence),
// Split pre-tokenizers with any behavior (the Qwen2/3, Qwen3.5 and Llama 3
// patterns, and GPT-2's for a ByteLevel pre-tokenizer with use_regex, run
// through hand-written matchers; any other pattern through regexp2) followed by a
// ByteLevel pre-tokenizer, the ByteLevel decoder, and added tokens (special or
// not, normalized or not, single_word, lstrip, rstrip) matched before BPE.
// Anything else is refused when the file is loaded. Truncation and padding
// settings are ignored: Encode returns every token.
//
// Character classes (\p{L}, \p{N}, \p{M}) follow Unicode 16.0 in the
// hand-written matchers, as Hugging Face's Oniguruma does; a pattern that goes
// through regexp2 sees Go's Unicode 15.0 tables.
package tokenizer

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
)

// Tokenizer encodes and decodes with one tokenizer.json. It is safe for
// concurrent use.
type Tokenizer struct {
	rawAdded  *addedMatcher // added tokens matched before normalization
	normAdded *addedMatcher // added tokens matched after normalization
	norm      normalizer
	pre       preTokenizer
	model     *bpeModel

	added map[string]int32 // content → id, as Hugging Face's added_tokens_map
	vocab map[string]int32 // the model's vocabulary (byte-level strings)

	// Decoding: idTokens[id] is the token string ("" with idKnown false for
	// ids that are neither vocabulary nor added tokens); with a ByteLevel
	// decoder, idBytes[idOff[id]:idOff[id+1]] are the bytes it decodes to.
	idTokens  []string
	idKnown   []bool
	byteLevel bool
	idBytes   []byte
	idOff     []uint32
}

// Load reads a tokenizer.json file (gzip-compressed if its name ends in .gz).
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
		}
		data, err = io.ReadAll(zr)
		if err != nil {
			return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
		}
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", path, err)
	}
	return t, nil
}

// Encode returns the token ids of s, as Hugging Face's
// Tokenizer.encode(s, add_special_tokens=True).ids does for the supported
// configurations. Ill-formed UTF-8 in s is first replaced by U+FFFD, one per
// maximal ill-formed subsequence (as Python's errors="replace" decoding does).
func (t *Tokenizer) Encode(s string) []int32 {
	s = toValidUTF8(s)
	out := make([]int32, 0, len(s)/3+4)
	var segBuf [8]segment
	for _, seg := range t.rawAdded.split(s, segBuf[:0]) {
		if seg.tok != nil {
			out = append(out, seg.tok.id)
			continue
		}
		text := s[seg.start:seg.end]
		if text == "" {
			continue
		}
		if t.norm != nil {
			text = t.norm.normalize(text)
		}
		if t.normAdded == nil {
			out = t.encodeText(out, text)
			continue
		}
		var inner [8]segment
		for _, sub := range t.normAdded.split(text, inner[:0]) {
			if sub.tok != nil {
				out = append(out, sub.tok.id)
			} else {
				out = t.encodeText(out, text[sub.start:sub.end])
			}
		}
	}
	return out
}

// encodeText pre-tokenizes normalized text and appends the BPE tokens of
// each piece.
func (t *Tokenizer) encodeText(out []int32, text string) []int32 {
	if qm := t.pre.fast; qm != nil {
		for i := 0; i < len(text); {
			e := progress(text, i, qm.next(text, i))
			out = t.model.appendWord(out, text[i:e])
			i = e
		}
		return out
	}
	for _, p := range t.pre.pieces(text) {
		out = t.model.appendWord(out, p)
	}
	return out
}

// Decode returns the text of ids, special tokens included; ids that are
// neither vocabulary nor added tokens are skipped. Byte sequences that are
// not valid UTF-8 become U+FFFD, as in Hugging Face.
func (t *Tokenizer) Decode(ids []int32) string {
	if !t.byteLevel {
		// No decoder: Hugging Face joins the token strings with spaces.
		var sb strings.Builder
		first := true
		for _, id := range ids {
			if id < 0 || int(id) >= len(t.idKnown) || !t.idKnown[id] {
				continue
			}
			if !first {
				sb.WriteByte(' ')
			}
			first = false
			sb.WriteString(t.idTokens[id])
		}
		return sb.String()
	}
	raw := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.idKnown) || !t.idKnown[id] {
			continue
		}
		raw = append(raw, t.idBytes[t.idOff[id]:t.idOff[id+1]]...)
	}
	return string(appendLossy(make([]byte, 0, len(raw)), raw))
}

// TokenID returns the id of a token given by its exact string: an added
// token's content, or a vocabulary entry as written in tokenizer.json (so a
// leading space is "Ġ"). Added tokens win, as in Hugging Face.
func (t *Tokenizer) TokenID(token string) (int32, bool) {
	if id, ok := t.added[token]; ok {
		return id, true
	}
	id, ok := t.vocab[token]
	return id, ok
}

// VocabSize returns one more than the largest token id (vocabulary or added).
func (t *Tokenizer) VocabSize() int { return len(t.idKnown) }
