package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/human"
)

// Item is one entry of the tray menu. Views render it; they never decide
// what it says.
type Item struct {
	// Action is what a click does (see the Action* constants; ActionUse
	// carries a model name after the colon). Empty for an informational
	// line, which views show disabled.
	Action string
	// Title is the visible text.
	Title string
	// Enabled is false for greyed-out items.
	Enabled bool
	// Checkable items show a check mark when Checked.
	Checkable, Checked bool
	// Separator items draw a line and ignore every other field.
	Separator bool
	// Children make the item a submenu.
	Children []Item
}

// Menu is the whole tray menu plus the tooltip of the tray icon.
type Menu struct {
	Tooltip string
	Items   []Item
}

// Actions a menu item can carry.
const (
	ActionStart      = "start"
	ActionRestart    = "restart"
	ActionLogin      = "login"
	ActionOpenModels = "open-models"
	ActionInt8       = "int8" // toggles "Use int8", reloading the model
	ActionQuit       = "quit"
	ActionUnload     = "unload"
	// ActionUse is followed by ":" and the model name.
	ActionUse = "use"
	// ActionIdleUnload is followed by ":" and a Go duration ("30m0s";
	// "0s": never).
	ActionIdleUnload = "idle-unload"
	// ActionAddModel asks for a Hub repository and has the daemon pull
	// and load it.
	ActionAddModel = "add-model"
)

// The dialog "Add Model…" opens.
const (
	AddModelTitle  = "Add Model"
	AddModelPrompt = "Hugging Face repository to download and use (owner/name, optionally @revision), such as Qwen/Qwen3.5-0.8B:"
)

// UseAction returns the action that switches to the named model.
func UseAction(name string) string { return ActionUse + ":" + name }

// IdleUnloadAction returns the action that sets the idle-unload time.
func IdleUnloadAction(d time.Duration) string { return ActionIdleUnload + ":" + d.String() }

// idleChoices are the idle-unload times the menu offers (0: never).
var idleChoices = []struct {
	d     time.Duration
	title string
}{
	{5 * time.Minute, "After 5 Minutes"},
	{30 * time.Minute, "After 30 Minutes"},
	{2 * time.Hour, "After 2 Hours"},
	{0, "Never"},
}

// MenuState is everything the menu is built from, gathered by one poll.
type MenuState struct {
	// Status is the daemon's status; StatusErr says why it could not be
	// read (the daemon is not running).
	Status    api.Status
	StatusErr error
	// Models lists what the daemon can load (nil when unknown).
	Models []api.ModelEntry
	// Starting is true while the app is starting the daemon.
	Starting bool
	// Switching names the model a switch is under way to ("" when none).
	Switching string
	// LoginItem is whether StartLux starts at login, as the system says;
	// LoginItemErr says why that could not be read.
	LoginItem    bool
	LoginItemErr error
	// Notice is a line to show on top, such as the last action's error or
	// that the daemon's login agent needs approval.
	Notice string
	// Int8 is the "Use int8" setting.
	Int8 bool
}

// BuildMenu turns a state into the menu the tray shows.
func BuildMenu(s MenuState) Menu {
	var items []Item
	info := func(format string, args ...any) {
		items = append(items, Item{Title: fmt.Sprintf(format, args...)})
	}
	sep := func() { items = append(items, Item{Separator: true}) }
	if s.Notice != "" {
		info("⚠ %s", s.Notice)
		sep()
	}

	var tooltip string
	up := s.StatusErr == nil
	st := s.Status
	switch {
	case !up && s.Starting:
		info("Daemon starting…")
		tooltip = "StartLux: daemon starting"
	case !up:
		info("Daemon not running")
		items = append(items, Item{Action: ActionStart, Title: "Start Daemon", Enabled: true})
		tooltip = "StartLux: daemon not running"
	case st.State == api.StateLoading || st.State == api.StateWarming:
		what := "Loading"
		if st.State == api.StateWarming {
			what = "Warming up"
		}
		line := fmt.Sprintf("Daemon %s %s…", strings.ToLower(what), modelLabel(st))
		if p := st.Progress; p != nil && p.Phase == api.PhasePulling {
			line = pullLine(p)
		} else if p != nil && p.Total > 0 && st.State == api.StateLoading {
			line += fmt.Sprintf(" %d%%", human.Percent(p.Done, p.Total))
		}
		info("%s", line)
		tooltip = "StartLux: " + strings.ToLower(what)
	case st.State == api.StateFailed:
		info("Model failed to load")
		if st.Error != "" {
			info("%s", truncate(st.Error, 80))
		}
		tooltip = "StartLux: model failed to load"
	case st.State == api.StateUnloaded:
		line := fmt.Sprintf("Model %s unloaded", modelLabel(st))
		if t, err := time.Parse(time.RFC3339, st.IdleSince); err == nil {
			line += fmt.Sprintf(" (idle since %s)", t.Local().Format("15:04"))
		}
		info("%s", line)
		info("The next decision loads it again")
		info("Memory: %s resident", human.Bytes(st.Memory.Resident))
		tooltip = "StartLux: model unloaded"
	default:
		tooltip = fmt.Sprintf("StartLux: %s", modelLabel(st))
	}
	if up && st.State == api.StateLoading && st.Memory.Note != "" {
		info("%s", truncate(st.Memory.Note, 80))
	}
	if up && st.State != api.StateFailed && st.State != api.StateLoading && st.State != api.StateUnloaded {
		if st.Model.Name != "" && !st.Model.Calibrated {
			info("Model: %s — %s", modelLabel(st), api.UncalibratedNote)
		} else {
			info("Model: %s", modelLabel(st))
		}
		if s.Switching != "" {
			info("Switching to %s…", s.Switching)
		}
		if p := st.Progress; p != nil && p.Phase == api.PhasePulling {
			info("%s", pullLine(p))
		} else if p := st.Progress; p != nil && s.Switching == "" {
			// A switch asked for elsewhere (startlux use): the old model
			// serves while the new one loads.
			line := fmt.Sprintf("Loading %s…", human.ModelLabel(p.Model))
			if p.Total > 0 && p.Phase != api.StateWarming {
				line += fmt.Sprintf(" %d%%", human.Percent(p.Done, p.Total))
			}
			info("%s", line)
		}
		info("Backend: %s", orDash(st.Model.Backend))
		if st.Model.BackendNote != "" {
			// Why the model is not on the GPU (or what goes wrong there);
			// startlux status gives it whole.
			info("⚠ %s", truncate(st.Model.BackendNote, 100))
		}
		info("int8: %s", st.Model.Int8Summary())
		m := st.Memory
		if m.Weights > 0 {
			info("Weights: %s", human.Bytes(m.Weights))
		}
		info("Memory: %s resident", human.Bytes(m.Resident))
		info("Prefix cache: %s / %s", human.Bytes(m.Cache), human.Bytes(m.CacheLimit))
		info("Scratch: %s / %s", human.Bytes(m.Scratch), human.Bytes(m.ScratchLimit))
		if m.Warning != "" {
			info("⚠ %s", truncate(m.Warning, 80))
		}
		line := fmt.Sprintf("Requests: %d", st.RequestsServed)
		if st.RequestsServed > 0 {
			line += fmt.Sprintf(" · p50 %s", human.MS(st.LatencyP50MS))
		}
		info("%s", line)
	}
	sep()

	if up {
		items = append(items, Item{Action: ActionUnload, Title: "Unload Model", Enabled: st.State == api.StateReady && s.Switching == ""})
		var idle []Item
		for _, c := range idleChoices {
			idle = append(idle, Item{Action: IdleUnloadAction(c.d), Title: c.title, Enabled: true, Checkable: true,
				Checked: time.Duration(st.IdleUnloadS*float64(time.Second)) == c.d})
		}
		items = append(items, Item{Title: "Unload When Idle", Enabled: true, Children: idle})
		sep()
	}

	var models []Item
	for _, m := range s.Models {
		title := m.Name
		switch {
		case m.Unloadable != "": // listed so the user sees it, but it cannot be switched to
			title += " (not loadable)"
		case !m.Calibrated:
			title += " — " + api.UncalibratedNote
		}
		models = append(models, Item{
			Action:    UseAction(m.Name),
			Title:     title,
			Enabled:   up && s.Switching == "" && m.Unloadable == "",
			Checkable: true,
			Checked:   m.Current,
		})
	}
	if len(models) == 0 {
		title := "No models listed"
		if !up {
			title = "Start the daemon to list models"
		}
		models = append(models, Item{Title: title})
	}
	models = append(models, Item{Separator: true},
		Item{Action: ActionAddModel, Title: "Add Model…", Enabled: up && s.Switching == ""},
		Item{Action: ActionOpenModels, Title: "Open Models Folder…", Enabled: true})
	items = append(items, Item{Title: "Switch Model", Enabled: true, Children: models})
	items = append(items, Item{Action: ActionInt8, Title: "Use int8", Enabled: up && s.Switching == "" && st.State != api.StateLoading,
		Checkable: true, Checked: s.Int8})
	sep()

	login := Item{Action: ActionLogin, Title: "Start at Login", Enabled: s.LoginItemErr == nil, Checkable: true, Checked: s.LoginItem}
	items = append(items, login)
	if up {
		items = append(items, Item{Action: ActionRestart, Title: "Restart Daemon", Enabled: true})
	}
	sep()
	items = append(items, Item{Action: ActionQuit, Title: "Quit StartLux", Enabled: true})
	return Menu{Tooltip: tooltip, Items: items}
}

func modelLabel(st api.Status) string {
	switch {
	case st.Model.Name != "":
		return st.Model.Name
	case st.Progress != nil && st.Progress.Model != "":
		return st.Progress.Model
	}
	return "model"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// Find returns the first item (searching submenus) whose action is action.
func (m Menu) Find(action string) (Item, bool) {
	var walk func([]Item) (Item, bool)
	walk = func(items []Item) (Item, bool) {
		for _, it := range items {
			if it.Action == action && !it.Separator {
				return it, true
			}
			if found, ok := walk(it.Children); ok {
				return found, true
			}
		}
		return Item{}, false
	}
	return walk(m.Items)
}

// Text renders the menu as indented lines (checked items marked "✓",
// disabled ones in brackets) — for logs, tests and the --print flag.
func (m Menu) Text() string {
	var b strings.Builder
	var walk func([]Item, string)
	walk = func(items []Item, indent string) {
		for _, it := range items {
			switch {
			case it.Separator:
				b.WriteString(indent + "---\n")
				continue
			case it.Checkable && it.Checked:
				b.WriteString(indent + "✓ ")
			case it.Checkable:
				b.WriteString(indent + "  ")
			default:
				b.WriteString(indent)
			}
			if it.Enabled || it.Action == "" && len(it.Children) > 0 {
				b.WriteString(it.Title)
			} else {
				b.WriteString("[" + it.Title + "]")
			}
			if len(it.Children) > 0 {
				b.WriteString(" ▸")
			}
			b.WriteString("\n")
			walk(it.Children, indent+"    ")
		}
	}
	walk(m.Items, "")
	return b.String()
}

// pullLine says how far a pull in the daemon is: the repository, the bytes
// so far and in all, and the rate.
func pullLine(p *api.LoadProgress) string {
	line := fmt.Sprintf("Downloading %s…", p.Repo)
	if p.Total > 0 {
		line += fmt.Sprintf(" %d%% of %s", human.Percent(p.Done, p.Total), human.Bytes(p.Total))
	}
	if p.Rate > 0 {
		line += fmt.Sprintf(" · %s/s", human.Bytes(int64(p.Rate)))
	}
	return line
}
