// Command mkapp builds dist/StartLux.app: cross-compiled universal
// executables, signed, with icons, Info.plist and the daemon's LaunchAgent.
// build-app.sh runs it; see docs/app.md.
//
//	go run ./tools/bundle/mkapp [-out dist] [-version 0.1.0] [-build 1] [-sign adhoc|p12|none] [-p12 FILE] [-zip]
//
// With -sign p12 the password is read from QUILL_SIGN_PASSWORD.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/startlux/startlux/tools/bundle"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkapp:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("mkapp", flag.ContinueOnError)
	out := fs.String("out", "dist", "output folder for StartLux.app (and StartLux.zip with -zip)")
	root := fs.String("root", ".", "module root (holds go.mod, Info.plist, Resources/)")
	version := fs.String("version", "0.1.0", "CFBundleShortVersionString")
	build := fs.String("build", "1", "CFBundleVersion")
	sign := fs.String("sign", "adhoc", "how to sign the executables: adhoc, p12 (quill with -p12) or none (codesign later)")
	p12 := fs.String("p12", "", "PKCS#12 identity for -sign p12 (password in QUILL_SIGN_PASSWORD)")
	zipIt := fs.Bool("zip", false, "also write StartLux.zip next to the app")
	verbose := fs.Bool("v", false, "print the commands run and their output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := bundle.Config{
		ModuleRoot:  *root,
		OutDir:      *out,
		Version:     *version,
		Build:       *build,
		P12:         *p12,
		P12Password: os.Getenv("QUILL_SIGN_PASSWORD"),
	}
	switch *sign {
	case "adhoc":
		cfg.Signing = bundle.SignQuillAdHoc
	case "p12":
		cfg.Signing = bundle.SignQuillP12
	case "none":
		cfg.Signing = bundle.SignNone
	default:
		return fmt.Errorf("-sign %q: want adhoc, p12 or none", *sign)
	}
	if *verbose {
		cfg.Log = os.Stderr
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	app, err := bundle.Build(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Println(app)
	if *zipIt {
		z := filepath.Join(*out, bundle.AppName+".zip")
		if err := bundle.Zip(app, z); err != nil {
			return err
		}
		fmt.Println(z)
	}
	return nil
}
