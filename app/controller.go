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

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/internal/settings"
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
	// SettingsFile is where the app's settings are kept (internal/settings:
	// "Use int8", and "Unload When Idle", which the daemon reads at its
	// next start); "" keeps them in memory only.
	SettingsFile string
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
	settings  settings.Settings
	synced    int // the pid of the last daemon whose int8 was made to follow the setting
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
	if opts.SettingsFile != "" {
		st, err := settings.Load(opts.SettingsFile)
		if err != nil {
			c.notice = err.Error() // and the defaults apply
		}
		c.settings = st
	}
	c.menu = BuildMenu(MenuState{StatusErr: errors.New("not polled yet"), Starting: true, Int8: c.settings.Int8})
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
	s.Int8 = c.settings.Int8
	menu := BuildMenu(s)
	c.menu, c.state = menu, s
	c.mu.Unlock()
	c.notify()
	return menu
}

// Run polls until ctx ends: at once (starting the daemon when it is not
// running — the first-run registration of the login agent on macOS), then
// every Interval and right after each action. The first time it finds a
// daemon (each daemon process) serving its model with int8 on while "Use
// int8" is off, or the other way round, it reloads the model to follow the
// setting, in the background.
func (c *Controller) Run(ctx context.Context) error {
	c.Poll(ctx)
	if c.State().StatusErr != nil {
		c.start(ctx)
	}
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	for {
		if name, on, ok := c.int8Drift(); ok {
			go c.loadInt8(ctx, name, on)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		case <-c.wake:
		}
		c.Poll(ctx)
	}
}

// int8Drift reports whether the daemon, as last polled, serves its model
// against the "Use int8" setting and has not been brought in line yet (once
// per daemon process, so that a change made elsewhere afterwards stands):
// the model to reload and the setting. A daemon whose backend cannot run
// int8 is left alone; the menu says why.
func (c *Controller) int8Drift() (name string, on, drift bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	st := s.Status
	if s.StatusErr != nil || st.State != api.StateReady || c.switching != "" || st.PID == c.synced {
		return "", false, false
	}
	c.synced = st.PID
	on = c.settings.Int8
	if st.Model.Int8 == on || on && st.Model.Int8Unavailable != "" {
		return "", false, false
	}
	return currentModel(s), on, true
}

// currentModel names the model the daemon serves (or failed to load) for
// the load method: the embedded demo by name, any other by its directory.
func currentModel(s MenuState) string {
	for _, m := range s.Models {
		if m.Current {
			if m.Path != "" {
				return m.Path
			}
			return m.Name
		}
	}
	if p := s.Status.Model.Path; p != "" && s.Status.Model.Name != "" && p != s.Status.Model.Name {
		return p
	}
	return "demo"
}

// errSwitching is returned for an action asked for while a switch runs.
var errSwitching = errors.New("already switching")

// switchTo loads the named model with int8 on or off, showing the switch
// in the menu while it runs; it refuses while another switch is under way.
func (c *Controller) switchTo(ctx context.Context, name string, on bool) error {
	c.mu.Lock()
	if c.switching != "" {
		busy := c.switching
		c.mu.Unlock()
		return fmt.Errorf("%w to %s", errSwitching, busy)
	}
	c.switching, c.notice = name, ""
	c.mu.Unlock()
	c.Poll(ctx)
	err := c.daemon.Load(ctx, name, on)
	c.mu.Lock()
	c.switching = ""
	c.mu.Unlock()
	return err
}

// loadInt8 reloads the named model with int8 on or off, and keeps the
// setting when the daemon took it.
func (c *Controller) loadInt8(ctx context.Context, name string, on bool) error {
	err := c.switchTo(ctx, name, on)
	if errors.Is(err, errSwitching) {
		return err
	}
	c.mu.Lock()
	var save error
	if err == nil && c.settings.Int8 != on {
		if c.opts.SettingsFile != "" {
			save = settings.Update(c.opts.SettingsFile, func(s *settings.Settings) { s.Int8 = on })
		}
		if save == nil {
			c.settings.Int8 = on
		}
	}
	c.mu.Unlock()
	if err == nil {
		err = save
	}
	return c.report(ctx, err, "turn int8 "+onOff(on))
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
		on := c.settings.Int8
		c.mu.Unlock()
		c.Poll(ctx)
		err = c.daemon.Pull(ctx, repo, on)
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
	case action == ActionUnload:
		c.setNotice("")
		return c.report(ctx, c.daemon.Unload(ctx), "unload the model")
	case strings.HasPrefix(action, ActionIdleUnload+":"):
		c.setNotice("")
		d, err := time.ParseDuration(strings.TrimPrefix(action, ActionIdleUnload+":"))
		if err != nil || d < 0 {
			return fmt.Errorf("menu action %q: want a duration of 0 or more", action)
		}
		if c.opts.SettingsFile != "" {
			if err := settings.Update(c.opts.SettingsFile, func(s *settings.Settings) { s.SetIdleUnload(d) }); err != nil {
				return c.report(ctx, err, "keep the idle-unload setting")
			}
		}
		return c.report(ctx, c.daemon.SetIdleUnload(ctx, d), "set the idle-unload time")
	case action == ActionInt8:
		c.mu.Lock()
		on, name := !c.settings.Int8, currentModel(c.state)
		c.mu.Unlock()
		return c.loadInt8(ctx, name, on)
	case strings.HasPrefix(action, ActionUse+":"):
		name := strings.TrimPrefix(action, ActionUse+":")
		c.mu.Lock()
		on := c.settings.Int8
		c.mu.Unlock()
		err := c.switchTo(ctx, name, on)
		if errors.Is(err, errSwitching) {
			return err
		}
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
