package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/startlux/startlux/model"
)

// runForward runs a checkpoint on token ids and writes the final normed
// hidden states ("norm", [T, H] f32) and the last position's logits
// ("logits_last", [V] f32) as safetensors (model.WriteOutputs).
func runForward(ctx context.Context, env *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("forward", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	dir := fs.String("model", "", "checkpoint directory (config.json + safetensors)")
	idsFlag := fs.String("ids", "", "comma-separated token ids, e.g. 1,2,3")
	out := fs.String("out", "", "output safetensors file")
	backend := backendFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *idsFlag == "" || *out == "" || fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("forward: --model, --ids and --out are required (and nothing else)")
	}
	ids, err := parseIDs(*idsFlag)
	if err != nil {
		return fmt.Errorf("forward: --ids: %w", err)
	}
	be, err := openBackend(*backend)
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	m, err := model.Load(*dir, be, model.LoadOptions{})
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	defer m.Close()
	if err := m.WriteOutputs(ctx, ids, *out); err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	fmt.Fprintf(env.stderr, "forward: %d tokens on %s: wrote norm [%d %d] and logits_last [%d] to %s\n",
		len(ids), be.Name(), len(ids), m.Config.Hidden, m.Config.Vocab, *out)
	return nil
}

// parseIDs parses "1,2,3" into token ids.
func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("item %d (%q) is not a token id", i+1, f)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}
