package human

import (
	"fmt"
	"io"
	"time"

	"github.com/startlux/startlux/api"
)

// Status writes the daemon's status as "startlux status" prints it: one
// line a field, the name padded to a column.
func Status(w io.Writer, st *api.Status) {
	if st.State == api.StateUnloaded {
		since := st.IdleSince
		if t, err := time.Parse(time.RFC3339, since); err == nil {
			since = t.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(w, "state:     unloaded (idle since %s; the next decision loads it again)\n", since)
	} else {
		fmt.Fprintf(w, "state:     %s\n", st.State)
	}
	if st.Error != "" {
		fmt.Fprintf(w, "error:     %s\n", st.Error)
	}
	if st.Model.Name != "" {
		if st.Model.Path == "" || st.Model.Path == st.Model.Name {
			fmt.Fprintf(w, "model:     %s\n", st.Model.Name)
		} else {
			fmt.Fprintf(w, "model:     %s (%s)\n", st.Model.Name, st.Model.Path)
		}
		fmt.Fprintf(w, "backend:   %s\n", st.Model.Backend)
		if st.Model.BackendNote != "" {
			fmt.Fprintf(w, "note:      %s\n", st.Model.BackendNote)
		}
		fmt.Fprintf(w, "int8:      %s\n", st.Model.Int8Summary())
		if st.State == api.StateReady || st.State == api.StateWarming {
			calibration := "calibrated"
			if !st.Model.Calibrated {
				calibration = api.UncalibratedNote + ": zero-shot, no decision_config.json"
			}
			fmt.Fprintf(w, "readout:   %s\n", calibration)
		}
	}
	if p := st.Progress; p != nil && p.Phase == api.PhasePulling {
		fmt.Fprintf(w, "pulling:   %s into %s: %s\n", p.Repo, p.Model, PullProgress(p))
	} else if p != nil {
		fmt.Fprintf(w, "loading:   %s: %s, %d%% of %.1f MB\n", ModelLabel(p.Model), p.Phase, Percent(p.Done, p.Total), float64(p.Total)/1e6)
	}
	memory(w, &st.Memory)
	idle := "never"
	if st.IdleUnloadS > 0 {
		idle = "after " + (time.Duration(st.IdleUnloadS * float64(time.Second))).String() + " without a decision"
	}
	fmt.Fprintf(w, "unload:    %s\n", idle)
	fmt.Fprintf(w, "requests:  %d served, %d failed, %d queued\n", st.RequestsServed, st.RequestsFailed, st.Queued)
	fmt.Fprintf(w, "latency:   p50 %s, p99 %s\n", MS(st.LatencyP50MS), MS(st.LatencyP99MS))
	fmt.Fprintf(w, "uptime:    %s (pid %d)\n", (time.Duration(st.UptimeS) * time.Second).String(), st.PID)
}

// memory writes status's memory lines: what the daemon holds, what the
// fit check found, what the machine has.
func memory(w io.Writer, m *api.MemoryStatus) {
	fmt.Fprintf(w, "memory:    %s resident: weights %s, prefix cache %s of %s, scratch %s of %s\n",
		MB(m.Resident), MB(m.Weights), MB(m.Cache), MB(m.CacheLimit), MB(m.Scratch), MB(m.ScratchLimit))
	if m.Needs > 0 || m.Available > 0 {
		line := fmt.Sprintf("fit:       the model needs %s at the limits; %s available", MB(m.Needs), MB(m.Available))
		if m.GPUWorkingSet > 0 {
			line += fmt.Sprintf("; GPU working set %s", MB(m.GPUWorkingSet))
		}
		fmt.Fprintln(w, line)
	}
	if m.Warning != "" {
		fmt.Fprintf(w, "warning:   %s\n", m.Warning)
	}
	if m.Note != "" {
		fmt.Fprintf(w, "note:      %s\n", m.Note)
	}
}

// PullProgress says how far a pull in the daemon is: bytes, total,
// percentage, rate, time left and the file being fetched.
func PullProgress(p *api.LoadProgress) string {
	s := Size(p.Done)
	if p.Total > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", Size(p.Total), Percent(p.Done, p.Total))
	}
	if p.Rate > 0 {
		s += fmt.Sprintf(", %s/s", Size(int64(p.Rate)))
	}
	if p.ETAS > 0 {
		s += fmt.Sprintf(", %s left", (time.Duration(p.ETAS) * time.Second).String())
	}
	if p.File != "" {
		s += ", fetching " + p.File
	}
	return s
}

// ModelLabel names a model directory for people ("" is the embedded demo
// model).
func ModelLabel(dir string) string {
	if dir == "" {
		return "the embedded demo model"
	}
	return dir
}
