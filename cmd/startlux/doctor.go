package main

import (
	"context"
	"encoding/json"

	"github.com/startlux/startlux/doctor"
)

// runDoctor is "startlux doctor [--json]": what a user pastes into a bug
// report. Every check says ok or failed with the reason; a failed check is
// reported, not fatal, so doctor exits 0 whatever it finds.
func runDoctor(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("doctor", "usage: startlux doctor [flags]\n\nChecks this machine for StartLux: the OS, the backend auto picks and why,\nMetal, the BLAS library, the int8 kernel, the GPU self-check per kernel family\n(under the kernel emulator off a Mac), the socket, the daemon, the login item\nand the models folder.", env.stderr)
	socket := socketFlag(fs)
	models := fs.String("models", "", "the models `DIR` to check (default: the models folder)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	noEmu := fs.Bool("no-emulator", false, "do not build the Metal kernel emulator (clang-19); off a Mac this leaves out the self-check")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	r := doctor.Run(ctx, doctor.Options{Socket: *socket, ModelsDir: *models, NoEmulator: *noEmu})
	if *asJSON {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	return r.WriteText(env.stdout)
}
