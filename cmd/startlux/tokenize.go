package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

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
	if err := tok.EncodeLines(ctx, env.stdin, env.stdout); err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	return nil
}
