package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/startlux/startlux/tokenizer"
)

// runTokenize reads one JSON string per line from stdin and prints, for each,
// one line holding the JSON array of its token ids.
func runTokenize(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(env.stderr, "usage: startlux tokenize --tokenizer FILE < lines.jsonl\n\n"+
			"Each input line is a JSON string; each output line is the JSON array of its token ids.\n\n")
		fs.PrintDefaults()
	}
	path := fs.String("tokenizer", "", "tokenizer.json (or .json.gz) to encode with (required)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" {
		fs.Usage()
		return errors.New("tokenize: --tokenizer is required")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("tokenize: unexpected arguments %q (input is read from stdin)", fs.Args())
	}
	tok, err := tokenizer.Load(*path)
	if err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	in := bufio.NewReaderSize(env.stdin, 1<<16)
	out := bufio.NewWriterSize(env.stdout, 1<<16)
	if err := tokenizeLines(ctx, tok, in, out); err != nil {
		out.Flush()
		return fmt.Errorf("tokenize: %w", err)
	}
	if err := out.Flush(); err != nil {
		return fmt.Errorf("tokenize: write: %w", err)
	}
	return nil
}

func tokenizeLines(ctx context.Context, tok *tokenizer.Tokenizer, in *bufio.Reader, out *bufio.Writer) error {
	var buf []byte
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read line %d: %w", n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '"' {
			return fmt.Errorf("line %d: want a JSON string, got %s", n, quoteStart(line))
		}
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		buf = append(buf[:0], '[')
		for i, id := range tok.Encode(s) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(id), 10)
		}
		buf = append(buf, ']', '\n')
		if _, err := out.Write(buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// quoteStart shows the start of a bad input line.
func quoteStart(line []byte) string {
	if len(line) == 0 {
		return "an empty line"
	}
	if len(line) > 40 {
		return strconv.Quote(string(line[:40])) + "..."
	}
	return strconv.Quote(string(line))
}
