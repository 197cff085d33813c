// Package app is StartLux's menu-bar app: a platform-neutral [Controller]
// that polls the daemon's status over ipc, builds the tray menu and carries
// out what the user picks, a [System] per OS that starts the daemon and
// manages "Start at Login", and a tray view per OS (NSStatusItem through
// purego on macOS, fyne.io/systray on Linux).
package app

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// System is what the controller asks of the operating system.
type System interface {
	// StartDaemon makes the daemon run: on macOS by registering its login
	// agent, else (or when that is refused) as a child process. A non-empty
	// notice is something the user should do (approve the agent).
	StartDaemon(ctx context.Context) (notice string, err error)
	// RestartDaemon stops the daemon and starts it again; pid is the
	// running daemon's process id as its status reported it (0 when
	// unknown), used when the daemon is not one the system manages.
	RestartDaemon(ctx context.Context, pid int) error
	// LoginItem reports whether StartLux starts at login.
	LoginItem(ctx context.Context) (bool, error)
	// SetLoginItem turns starting at login on or off.
	SetLoginItem(ctx context.Context, on bool) error
	// OpenFolder shows a folder in the file manager, creating it first.
	OpenFolder(ctx context.Context, dir string) error
	// AskText asks the user for a line of text in a dialog with a title
	// and a prompt; ok is false when the user cancelled.
	AskText(ctx context.Context, title, prompt string) (text string, ok bool, err error)
	// Stop ends a daemon the app runs as its child (an agent keeps running).
	Stop() error
}

// Options tune a [Controller].
type Options struct {
	// Interval is how often the daemon is polled (2 s when zero).
	Interval time.Duration
	// CallTimeout bounds each status or models call (3 s when zero).
	CallTimeout time.Duration
	// StartTimeout is how long "starting" may last before the menu says the
	// daemon did not come up (60 s when zero).
	StartTimeout time.Duration
	// ModelsDir is the folder "Open Models Folder…" opens.
	ModelsDir string
	// OnQuit is called by the quit action after the child daemon stopped.
	OnQuit func()
}

// Controller owns the menu: it polls the daemon, rebuilds the menu when
// something changed, tells the views, and carries out actions. Its methods
// are safe for concurrent use.
type Controller struct {
	daemon Daemon
	sys    System
	opts   Options
	wake   chan struct{}

	// notifyMu serialises calls to listeners, so each sees menus in order.
	notifyMu  sync.Mutex
	sent      Menu // the menu last given to the listeners (under notifyMu)
	sentValid bool

	mu        sync.Mutex // guards the fields below
	startedAt time.Time  // when a start began; zero when none is under way
	switching string
	notice    string
	menu      Menu
	state     MenuState
	listeners []func(Menu)
}

// New returns a controller over a daemon and a system.
func New(d Daemon, sys System, opts Options) *Controller {
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 3 * time.Second
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	c := &Controller{daemon: d, sys: sys, opts: opts, wake: make(chan struct{}, 1)}
	c.menu = BuildMenu(MenuState{StatusErr: errors.New("not polled yet"), Starting: true})
	return c
}

// OnChange registers f and calls it at once with the current menu, then
// again whenever the menu changes — always with the latest menu and never
// two calls at once, so a view that shows what it is given is never left
// behind. Calls come from whichever goroutine polled; views hop to their UI
// thread themselves. f must not call OnChange.
func (c *Controller) OnChange(f func(Menu)) {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	c.listeners = append(c.listeners, f)
	m := c.menu
	c.mu.Unlock()
	f(m)
}

// notify gives the latest menu to the listeners if they have not had it.
func (c *Controller) notify() {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	c.mu.Lock()
	m := c.menu
	listeners := append([]func(Menu){}, c.listeners...)
	c.mu.Unlock()
	if c.sentValid && reflect.DeepEqual(m, c.sent) {
		return
	}
	c.sent, c.sentValid = m, true
	for _, f := range listeners {
		f(m)
	}
}

// Menu returns the current menu.
func (c *Controller) Menu() Menu {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.menu
}

// State returns what the current menu was built from.
func (c *Controller) State() MenuState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// Poll asks the daemon and the system for their state once, rebuilds the
// menu, tells the listeners when it changed, and returns it.
func (c *Controller) Poll(ctx context.Context) Menu {
	var s MenuState
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	s.Status, s.StatusErr = c.daemon.Status(cctx)
	cancel()
	if s.StatusErr == nil {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		models, err := c.daemon.Models(cctx)
		cancel()
		if err == nil {
			s.Models = models
		}
	}
	s.LoginItem, s.LoginItemErr = c.sys.LoginItem(ctx)

	c.mu.Lock()
	if !c.startedAt.IsZero() {
		switch {
		case s.StatusErr == nil:
			c.startedAt = time.Time{}
		case time.Since(c.startedAt) > c.opts.StartTimeout:
			c.startedAt = time.Time{}
			c.notice = fmt.Sprintf("The daemon did not start within %v: %v", c.opts.StartTimeout, s.StatusErr)
		}
	}
	s.Starting = !c.startedAt.IsZero()
	s.Switching = c.switching
	s.Notice = c.notice
	menu := BuildMenu(s)
	c.menu, c.state = menu, s
	c.mu.Unlock()
	c.notify()
	return menu
}

// Run polls until ctx ends: at once (starting the daemon when it is not
// running — the first-run registration of the login agent on macOS), then
// every Interval and right after each action.
func (c *Controller) Run(ctx context.Context) error {
	c.Poll(ctx)
	if c.State().StatusErr != nil {
		c.start(ctx)
	}
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-c.wake:
		}
		c.Poll(ctx)
	}
}

// kick asks Run to poll now.
func (c *Controller) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// setNotice sets (or with "" clears) the line shown on top of the menu.
func (c *Controller) setNotice(s string) {
	c.mu.Lock()
	c.notice = s
	c.mu.Unlock()
}

func (c *Controller) start(ctx context.Context) error {
	c.mu.Lock()
	c.startedAt = time.Now()
	c.mu.Unlock()
	notice, err := c.sys.StartDaemon(ctx)
	if err != nil {
		c.mu.Lock()
		c.startedAt = time.Time{}
		c.mu.Unlock()
		err = fmt.Errorf("start the daemon: %w", err)
		c.setNotice(err.Error())
		c.Poll(ctx)
		return err
	}
	c.setNotice(notice)
	c.Poll(ctx)
	return nil
}

// Handle carries out a menu action and polls again. It blocks until the
// action is done (a model switch returns once the daemon serves the new
// model), so views call it off their UI thread. A failure is returned and
// also shown on top of the menu until the next action.
func (c *Controller) Handle(ctx context.Context, action string) error {
	defer c.kick()
	switch {
	case action == ActionStart:
		return c.start(ctx)
	case action == ActionRestart:
		c.setNotice("")
		c.mu.Lock()
		c.startedAt = time.Now()
		pid := c.state.Status.PID
		if c.state.StatusErr != nil {
			pid = 0
		}
		c.mu.Unlock()
		return c.report(ctx, c.sys.RestartDaemon(ctx, pid), "restart the daemon")
	case action == ActionLogin:
		c.setNotice("")
		on, err := c.sys.LoginItem(ctx)
		if err == nil {
			err = c.sys.SetLoginItem(ctx, !on)
		}
		return c.report(ctx, err, "change Start at Login")
	case action == ActionOpenModels:
		c.setNotice("")
		return c.report(ctx, c.sys.OpenFolder(ctx, c.opts.ModelsDir), "open the models folder")
	case action == ActionAddModel:
		c.setNotice("")
		repo, ok, err := c.sys.AskText(ctx, AddModelTitle, AddModelPrompt)
		if err != nil || !ok {
			return c.report(ctx, err, "add a model")
		}
		repo = strings.TrimSpace(repo)
		if repo == "" {
			return c.report(ctx, errors.New("no repository given"), "add a model")
		}
		c.mu.Lock()
		if c.switching != "" {
			busy := c.switching
			c.mu.Unlock()
			return c.report(ctx, fmt.Errorf("already switching to %s", busy), "add a model")
		}
		c.switching = repo
		c.mu.Unlock()
		c.Poll(ctx)
		err = c.daemon.Pull(ctx, repo)
		c.mu.Lock()
		c.switching = ""
		c.mu.Unlock()
		return c.report(ctx, err, "add model "+repo)
	case action == ActionQuit:
		err := c.sys.Stop()
		if c.opts.OnQuit != nil {
			c.opts.OnQuit()
		}
		return err
	case strings.HasPrefix(action, ActionUse+":"):
		name := strings.TrimPrefix(action, ActionUse+":")
		c.mu.Lock()
		if c.switching != "" {
			busy := c.switching
			c.mu.Unlock()
			return fmt.Errorf("already switching to %s", busy)
		}
		c.switching, c.notice = name, ""
		c.mu.Unlock()
		c.Poll(ctx)
		err := c.daemon.Load(ctx, name)
		c.mu.Lock()
		c.switching = ""
		c.mu.Unlock()
		return c.report(ctx, err, "switch model")
	}
	return fmt.Errorf("unknown menu action %q", action)
}

// report shows err (if any) on the menu and polls.
func (c *Controller) report(ctx context.Context, err error, what string) error {
	if err != nil {
		err = fmt.Errorf("%s: %w", what, err)
		c.setNotice(err.Error())
	}
	c.Poll(ctx)
	return err
}
