package doctor

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the report for people: one line per check, ok or
// failed with the reason, and what it found.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	// line writes a check: what it found when ok, else the reason, with
	// what it found (when anything) after it.
	line := func(name string, c Check, format string, args ...any) {
		what := fmt.Sprintf(format, args...)
		if c.Status != OK {
			if what != "" {
				what = c.Reason + "; " + what
			} else {
				what = c.Reason
			}
		}
		fmt.Fprintf(&b, "%-12s %-7s %s\n", name, c.Status, what)
	}
	s := r.System
	line("system", s.Check, "%s/%s, %s, %d CPUs, %s", s.OS, s.Arch, s.OSVersion, s.CPUs, s.GoVersion)
	line("backend", r.Backend.Check, "auto picks %s: %s", r.Backend.Auto, r.Backend.Why)
	m := r.Metal
	if m.Device != "" {
		line("metal", m.Check, "%s, %s, working set %s, largest buffer %s", m.Device, strings.Join(m.Families, " "),
			gib(m.RecommendedMaxWorkingSetSize), gib(m.MaxBufferLength))
	} else {
		line("metal", m.Check, "")
	}
	line("  library", m.Library, "%s", okText(m.Library, "the kernels compile"))
	line("  emulator", m.Emulator, "%s", okText(m.Emulator, "the kernels build under clang-19"))
	line("blas", r.BLAS.Check, "%s, sgemm %s: %.1f GFLOP/s", r.BLAS.Library, r.BLAS.Shape, r.BLAS.GFLOPS)
	if r.Int8.Kernel != "" {
		line("int8", r.Int8.Check, "%s on backend %s", r.Int8.Kernel, r.Int8.Backend)
	} else {
		line("int8", r.Int8.Check, "")
	}
	sc := r.SelfCheck
	line("self-check", sc.Check, "%s", sc.summary())
	sub := func(name string, c Check, what string) {
		if c.Status != OK {
			what = c.Reason
		}
		fmt.Fprintf(&b, "  %-20s %-7s %s\n", name, c.Status, what)
	}
	for _, f := range sc.Families {
		sub(f.Name, f.Check, fmt.Sprintf("%.1e (tol %.0e) at %s", f.MaxRel, f.Tol, f.Where))
	}
	if sc.On != "" {
		m := sc.Model
		sub("demo model", m.Check, fmt.Sprintf("%d rows, letter logits %.1e (tol %.0e) at %s", m.Rows, m.MaxRel, m.Tol, m.Where))
	}
	so := r.Socket
	dir := "directory not made yet"
	if so.DirExists {
		dir = fmt.Sprintf("directory %s, owner %s (uid %d)", so.DirMode, so.DirOwner, so.DirOwnerUID)
	}
	line("socket", so.Check, "%s (%s)", so.Path, dir)
	if d := r.Daemon; d.Reported != nil {
		st := d.Reported
		line("daemon", d.Check, "%s, model %s on %s, %d served, pid %d", st.State, st.Model.Name, st.Model.Backend, st.RequestsServed, st.PID)
		if st.Model.BackendNote != "" {
			// Why the model is not on the backend asked for (a GPU
			// that failed its check or faulted).
			fmt.Fprintf(&b, "  %-20s %s\n", "backend note", st.Model.BackendNote)
		}
	} else {
		line("daemon", d.Check, "")
	}
	var items []string
	for _, it := range r.LoginItem.Items {
		items = append(items, fmt.Sprintf("%s (%s): %s", it.Name, it.Kind, it.State))
	}
	line("login item", r.LoginItem.Check, "%s", strings.Join(items, "; "))
	var models []string
	for _, mo := range r.Models.Models {
		st := "ok"
		if mo.Status != OK {
			st = "failed: " + mo.Reason
		}
		models = append(models, mo.Name+" "+st)
	}
	line("models", r.Models.Check, "%s: %s", r.Models.Dir, strings.Join(models, "; "))
	_, err := io.WriteString(w, b.String())
	return err
}

// okText is text for a check that passed, "" for one that failed.
func okText(c Check, text string) string {
	if c.Status != OK {
		return ""
	}
	return text
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
