package bench

import (
	"context"
	"flag"
	"io"
	"strings"
	"time"

	"github.com/startlux/startlux/tokenizer"
	"github.com/startlux/startlux/tokenizer/tokenizertest"
)

// TokenizeOptions configures Tokenize.
type TokenizeOptions struct {
	Tokenizer string        // tokenizer.json (or .json.gz) to measure
	Time      time.Duration // how long to measure each text
}

func (o *TokenizeOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.Tokenizer, "tokenizer", "testdata/qwen3-tokenizer/tokenizer.json.gz", "tokenizer.json (or .json.gz) to measure")
	fs.DurationVar(&o.Time, "time", 3*time.Second, "how long to measure each text")
}

// TokenizeReport is what Tokenize measured.
type TokenizeReport struct {
	Texts []TokenizeResult
}

// TokenizeResult is the encode rate of one text.
type TokenizeResult struct {
	Name        string
	MBPerSecond float64 // of input text, 1 MB = 10⁶ bytes, one goroutine
}

// Tokenize measures single-goroutine encode throughput on 1 MB of mixed text
// (tokenizertest.MixedText), as one string and paragraph by paragraph.
func Tokenize(ctx context.Context, env Env, o TokenizeOptions) (*TokenizeReport, error) {
	tok, err := tokenizer.Load(o.Tokenizer)
	if err != nil {
		return nil, err
	}
	mixed := tokenizertest.MixedText(1 << 20)
	lines := strings.Split(mixed, "\n")
	r := &TokenizeReport{}
	for _, c := range []struct {
		name  string
		texts []string
	}{
		{"1 MB mixed text, as one string", []string{mixed}},
		{"1 MB mixed text, paragraph by paragraph", lines},
	} {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r.Texts = append(r.Texts, TokenizeResult{Name: c.name, MBPerSecond: encodeRate(tok, c.texts, o.Time)})
	}
	return r, nil
}

// Print writes the report.
func (r *TokenizeReport) Print(w io.Writer) error {
	p := &printer{w: w}
	for _, t := range r.Texts {
		p.printf("tokenize %s: %.1f MB/s (one goroutine)\n", t.Name, t.MBPerSecond)
	}
	return p.err
}

// encodeRate encodes texts one after another, over and over, on the calling
// goroutine for at least dur (and at least one full pass), and returns the
// throughput in MB/s of input text (1 MB = 10⁶ bytes). The tokenizer's cache
// is warmed by an untimed first pass, so the figure is the steady state.
func encodeRate(t *tokenizer.Tokenizer, texts []string, dur time.Duration) (mbPerSec float64) {
	for _, s := range texts {
		t.Encode(s)
	}
	var n int64
	start := time.Now()
	for {
		for _, s := range texts {
			t.Encode(s)
			n += int64(len(s))
		}
		if el := time.Since(start); el >= dur {
			return float64(n) / el.Seconds() / 1e6
		}
	}
}
