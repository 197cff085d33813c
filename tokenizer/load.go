package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

type fileJSON struct {
	Version       *string          `json:"version"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

type addedTokenJSON struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord bool    `json:"single_word"`
	Lstrip     bool    `json:"lstrip"`
	Rstrip     bool    `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    bool    `json:"special"`
}

type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	FuseUnk                 bool     `json:"fuse_unk"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
}

// componentJSON is any normalizer, pre-tokenizer, decoder or post-processor.
type componentJSON struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json file.
func FromJSON(data []byte) (*Tokenizer, error) {
	t := &Tokenizer{}
	sc := &scanner{data: data}
	var model *modelParts
	if sc.peek() != '{' {
		return nil, fmt.Errorf("parse tokenizer.json: %w", sc.errorf("want a JSON object"))
	}
	fields, err := sc.rawObject(map[string]func() error{
		"model": func() error {
			var err error
			model, err = scanModel(sc)
			return err
		},
	})
	if err == nil && sc.peek() != 0 {
		err = sc.errorf("data after the top-level object")
	}
	if err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	var f fileJSON
	if err := unmarshalFields(fields, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", err)
	}
	if f.Version != nil && *f.Version != "1.0" {
		return nil, fmt.Errorf("unknown tokenizer.json version %q (want 1.0)", *f.Version)
	}
	if t.norm, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if err := checkPostProcessor(f.PostProcessor); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	if t.byteLevel, err = parseDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	if model == nil {
		return nil, errors.New("model: missing")
	}
	if err := t.buildModel(model); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := t.buildAdded(f.AddedTokens); err != nil {
		return nil, fmt.Errorf("added_tokens: %w", err)
	}
	t.model.maxTokenBytes = maxTokenBytesOf(t.model, t.vocab, f.AddedTokens)
	t.buildDecoder()
	return t, nil
}

// modelParts is the model object as scanned: the vocabulary already read,
// the merges kept as raw text until the vocabulary is known.
type modelParts struct {
	modelJSON
	vocab  map[string]int32
	merges []byte // from the merges array to the end of the file
}

// scanModel reads the model object: vocab and merges with the fast scanner,
// the rest through encoding/json.
func scanModel(sc *scanner) (*modelParts, error) {
	m := &modelParts{}
	if sc.peek() == 'n' {
		if _, err := sc.skip(); err != nil {
			return nil, err
		}
		return nil, nil
	}
	mergesAt := -1
	fields, err := sc.rawObject(map[string]func() error{
		"vocab": func() error {
			var err error
			m.vocab, err = scanVocab(sc)
			if err != nil {
				return fmt.Errorf("model: vocab: %w", err)
			}
			return nil
		},
		"merges": func() error {
			mergesAt = sc.peekPos()
			if sc.peek() == 'n' {
				mergesAt = -1
			}
			_, err := sc.skip()
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	if err := unmarshalFields(fields, &m.modelJSON); err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if mergesAt >= 0 {
		m.merges = sc.data[mergesAt:]
	}
	return m, nil
}

// maxTokenID bounds token ids, which size the decoding tables; real
// vocabularies stay far below it.
const maxTokenID = 1 << 24

// scanVocab reads the token → id object; all keys share one backing string.
func scanVocab(sc *scanner) (map[string]int32, error) {
	if sc.peek() == 'n' {
		_, err := sc.skip()
		return nil, err
	}
	type entry struct {
		off, n int
		id     int32
	}
	var entries []entry
	var arena []byte
	err := sc.object(func(key []byte) error {
		id, err := sc.uint()
		if err != nil {
			return fmt.Errorf("token %q: %w", key, err)
		}
		if id >= maxTokenID {
			return fmt.Errorf("token %q: id %d is too large (the limit is %d)", key, id, maxTokenID-1)
		}
		entries = append(entries, entry{len(arena), len(key), id})
		arena = append(arena, key...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	all := string(arena)
	vocab := make(map[string]int32, len(entries))
	for _, e := range entries {
		vocab[all[e.off:e.off+e.n]] = e.id
	}
	return vocab, nil
}

// scanMerges reads the merges, written as ["a", "b"] pairs or as "a b"
// strings, and enters them in the merge table with their ranks.
func (t *Tokenizer) scanMerges(data []byte, table *mergeTable) error {
	sc := &scanner{data: data}
	legacy := false
	rank := 0
	var a, joined []byte
	add := func(i int, left, right []byte) error {
		ia, ok := t.vocab[string(left)]
		if !ok {
			return fmt.Errorf("merges[%d] %q %q: unknown merge token %q (not in vocab)", i, left, right, left)
		}
		ib, ok := t.vocab[string(right)]
		if !ok {
			return fmt.Errorf("merges[%d] %q %q: unknown merge token %q (not in vocab)", i, left, right, right)
		}
		joined = append(append(joined[:0], left...), right...)
		id, ok := t.vocab[string(joined)]
		if !ok {
			return fmt.Errorf("merges[%d] %q %q: merged token %q is not in vocab", i, left, right, joined)
		}
		table.put(ia, ib, uint32(rank), id)
		rank++
		return nil
	}
	err := sc.array(func(i int) error {
		c := sc.peek()
		if i == 0 {
			legacy = c == '"'
		}
		start := sc.pos
		if legacy {
			if c != '"' {
				return fmt.Errorf("merges[%d]: not a string like the first entry", i)
			}
			line, err := sc.str()
			if err != nil {
				return fmt.Errorf("merges[%d]: %w", i, err)
			}
			if bytes.HasPrefix(line, []byte("#version")) {
				return nil
			}
			left, right, ok := bytes.Cut(line, []byte(" "))
			if !ok || bytes.IndexByte(right, ' ') >= 0 {
				return fmt.Errorf("merges[%d] = %q: want two tokens separated by one space (bad merge %d)", i, line, rank+1)
			}
			a = append(a[:0], left...)
			return add(i, a, right)
		}
		bad := func() error {
			sc.pos = start
			raw, _ := sc.skip()
			return fmt.Errorf("merges[%d] = %s: want a pair of token strings", i, raw)
		}
		if c != '[' {
			return bad()
		}
		var pair [2][]byte
		n := 0
		err := sc.array(func(k int) error {
			if k >= 2 || sc.peek() != '"' {
				return errors.New("bad pair")
			}
			s, err := sc.str()
			if err != nil {
				return err
			}
			if k == 0 {
				a = append(a[:0], s...)
				pair[0] = a
			} else {
				pair[1] = s
			}
			n++
			return nil
		})
		if err != nil || n != 2 {
			return bad()
		}
		return add(i, pair[0], pair[1])
	})
	return err
}

func (t *Tokenizer) buildModel(mp *modelParts) error {
	mj := &mp.modelJSON
	if mj.Type != "" && mj.Type != "BPE" {
		return fmt.Errorf("unsupported model type %q (only BPE)", mj.Type)
	}
	if mp.vocab == nil {
		return errors.New("missing vocab")
	}
	if mp.merges == nil {
		return errors.New("missing merges")
	}
	if mj.Dropout != nil && *mj.Dropout != 0 {
		return fmt.Errorf("BPE dropout %v is not supported (encoding would be random)", *mj.Dropout)
	}
	if mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("continuing_subword_prefix %q is not supported in a byte-level BPE", *mj.ContinuingSubwordPrefix)
	}
	if mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "" {
		return fmt.Errorf("end_of_word_suffix %q is not supported in a byte-level BPE", *mj.EndOfWordSuffix)
	}
	if len(mp.vocab) == 0 {
		return errors.New("vocab is empty")
	}
	t.vocab = mp.vocab
	m := &bpeModel{cache: newWordCache(), unkID: -1, fuseUnk: mj.FuseUnk, ignoreMerges: mj.IgnoreMerges}
	// A vocabulary has about one merge per token; the table grows if not.
	m.merges = newMergeTable(len(t.vocab))
	if err := t.scanMerges(mp.merges, &m.merges); err != nil {
		return err
	}

	chars := byteLevelChars()
	m.allBytes = true
	for b := 0; b < 256; b++ {
		id, ok := t.vocab[string(chars[b])]
		if !ok {
			m.byteID[b] = -1
			m.allBytes = false
			continue
		}
		m.byteID[b] = id
	}
	if !m.allBytes {
		if mj.ByteFallback {
			for b := 0; b < 256; b++ {
				if m.byteID[b] >= 0 {
					continue
				}
				// Hugging Face looks up <0xXX> for each UTF-8 byte of the
				// byte-level character, not for the byte itself.
				var syms []int32
				var buf [4]byte
				n := utf8.EncodeRune(buf[:], chars[b])
				for _, c := range buf[:n] {
					id, ok := t.vocab[fmt.Sprintf("<0x%02X>", c)]
					if !ok {
						syms = nil
						break
					}
					syms = append(syms, id)
				}
				m.byteSyms[b] = syms
			}
		}
		if mj.UnkToken != nil {
			id, ok := t.vocab[*mj.UnkToken]
			if !ok {
				return fmt.Errorf("unk_token %q is not in vocab", *mj.UnkToken)
			}
			m.unkID = id
		}
	}
	if m.ignoreMerges {
		dec := newByteLevelDecoder()
		m.byteVocab = make(map[string]int32, len(t.vocab))
		for tok, id := range t.vocab {
			if raw, ok := dec.bytes(tok); ok {
				m.byteVocab[string(raw)] = id
			}
		}
	}
	t.model = m
	return nil
}

// buildAdded registers the added tokens as Hugging Face does when it reads a
// tokenizer.json: each token keeps the id its content already has (as an
// added token or in the vocabulary), else takes the next free id after the
// vocabulary. (The ids written in the file are only compared, by Hugging
// Face, for a warning.)
func (t *Tokenizer) buildAdded(list []addedTokenJSON) error {
	t.added = make(map[string]int32, len(list))
	byID := make(map[int32]*addedToken, len(list))
	var order []int32
	next := int32(len(t.vocab))
	for i, a := range list {
		if a.Content == nil {
			return fmt.Errorf("added_tokens[%d]: missing content", i)
		}
		if *a.Content == "" {
			continue
		}
		tok := &addedToken{
			content:    *a.Content,
			singleWord: a.SingleWord,
			lstrip:     a.Lstrip,
			rstrip:     a.Rstrip,
			normalized: a.Normalized == nil || *a.Normalized,
			special:    a.Special,
		}
		if id, ok := t.added[tok.content]; ok {
			if old := byID[id]; old != nil && sameAdded(old, tok) {
				continue
			}
		}
		id, ok := t.TokenID(tok.content)
		if !ok {
			id = next
			next++
		}
		tok.id = id
		t.added[tok.content] = id
		if _, seen := byID[id]; !seen {
			order = append(order, id)
		}
		byID[id] = tok
	}
	var raw, normed []addedPattern
	for _, id := range order {
		tok := byID[id]
		if !tok.normalized {
			raw = append(raw, addedPattern{tok.content, tok})
			continue
		}
		text := tok.content
		if t.norm != nil {
			text = t.norm.normalize(text)
		}
		normed = append(normed, addedPattern{text, tok})
	}
	t.rawAdded = newAddedMatcher(raw)
	t.normAdded = newAddedMatcher(normed)

	// Ids to token strings, for decoding: added tokens (their normalized
	// form when they are normalized) over the vocabulary.
	n := 0
	for _, id := range t.vocab {
		n = max(n, int(id)+1)
	}
	for id := range byID {
		n = max(n, int(id)+1)
	}
	t.idTokens = make([]string, n)
	t.idKnown = make([]bool, n)
	for tok, id := range t.vocab {
		t.idTokens[id] = tok
		t.idKnown[id] = true
	}
	for _, p := range append(raw, normed...) {
		t.idTokens[p.tok.id] = p.text
		t.idKnown[p.tok.id] = true
	}
	return nil
}

func sameAdded(a, b *addedToken) bool {
	return a.content == b.content && a.singleWord == b.singleWord && a.lstrip == b.lstrip &&
		a.rstrip == b.rstrip && a.normalized == b.normalized && a.special == b.special
}

// buildDecoder precomputes the bytes each id decodes to under the ByteLevel
// decoder: the bytes its characters stand for, or the token's own UTF-8 when
// some character is outside the byte-level alphabet.
func (t *Tokenizer) buildDecoder() {
	if !t.byteLevel {
		return
	}
	dec := newByteLevelDecoder()
	t.idOff = make([]uint32, len(t.idTokens)+1)
	t.idBytes = make([]byte, 0, 4*len(t.idTokens))
	for id, tok := range t.idTokens {
		t.idOff[id] = uint32(len(t.idBytes))
		if raw, ok := dec.bytes(tok); ok {
			t.idBytes = append(t.idBytes, raw...)
		} else {
			t.idBytes = append(t.idBytes, tok...)
		}
	}
	t.idOff[len(t.idTokens)] = uint32(len(t.idBytes))
}
