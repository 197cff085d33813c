// Command startlux-app is StartLux's menu-bar app (Contents/MacOS/StartLux in
// the bundle): it makes sure the daemon runs, shows what it is doing, and
// lets the user switch models, turn int8 on or off (kept in its settings
// file), restart the daemon and start at login. On
// Linux it shows the same menu in the system tray (StatusNotifierItem).
//
//	startlux-app [--socket PATH] [--print | --login-status]
//
// --print polls the daemon once, prints the menu as text and exits.
// --login-status prints the login items as the system reports them (on
// macOS the SMAppService statuses, which only the app itself can read) as
// JSON and exits; startlux doctor runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/app"
	"github.com/startlux/startlux/internal/settings"
)

func main() {
	if err := run(os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "startlux-app:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("startlux-app", flag.ContinueOnError)
	socket := fs.String("socket", "", "the daemon's socket (default: the per-user default path)")
	printMenu := fs.Bool("print", false, "poll the daemon once, print the menu as text and exit")
	loginStatus := fs.Bool("login-status", false, "print the login items as the system reports them, as JSON, and exit")
	// Old macOS versions pass -psn_<serial> to apps opened from the Finder.
	args = slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "-psn_") })
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var daemonArgs []string
	if *socket != "" {
		daemonArgs = []string{"--socket", *socket}
	}
	sys, err := app.NewSystem(daemonArgs)
	if err != nil {
		return err
	}
	if *loginStatus {
		l, ok := sys.(app.LoginItemLister)
		if !ok {
			return fmt.Errorf("this system cannot report its login items")
		}
		items, err := l.LoginItems(context.Background())
		if err != nil {
			return err
		}
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	models, err := api.ModelsDir()
	if err != nil {
		return err
	}
	settingsPath, err := settings.Path()
	if err != nil {
		return err
	}
	d := app.NewIPCDaemon(*socket)
	defer d.Close()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctrl := app.New(d, sys, app.Options{ModelsDir: models, SettingsFile: settingsPath, OnQuit: cancel})
	if *printMenu {
		fmt.Print(ctrl.Poll(ctx).Text())
		return nil
	}
	go ctrl.Run(ctx)
	err = app.RunTray(ctx, ctrl)
	if serr := sys.Stop(); err == nil {
		err = serr
	}
	return err
}
