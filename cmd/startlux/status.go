package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/hub"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// runStatus is "startlux status [--json]": what the daemon is doing.
func runStatus(ctx context.Context, env *cmdEnv, args []string) error {
	fs := clientFlagSet("status", "usage: startlux status [flags]\n\nShows what the daemon is doing.", env.stderr)
	socket := socketFlag(fs)
	asJSON := fs.Bool("json", false, "print the status as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("status: unexpected argument %q", fs.Arg(0))
	}
	c, err := dialDaemon(ctx, *socket)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	defer c.Close()
	var raw msgpack.RawMessage
	if err := c.Call(ctx, api.MethodStatus, nil, &raw); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if *asJSON {
		return printJSON(env.stdout, raw)
	}
	var st api.Status
	if err := ipc.Unmarshal(raw, &st); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	printStatus(env.stdout, &st)
	return nil
}

// printStatus writes the status for people.
func printStatus(w io.Writer, st *api.Status) {
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
		fmt.Fprintf(w, "pulling:   %s into %s: %s\n", p.Repo, p.Model, pullProgressText(p))
	} else if p != nil {
		pct := 0.0
		if p.Total > 0 {
			pct = 100 * float64(p.Done) / float64(p.Total)
		}
		fmt.Fprintf(w, "loading:   %s: %s, %.0f%% of %.1f MB\n", modelLabel(p.Model), p.Phase, pct, float64(p.Total)/1e6)
	}
	printMemory(w, &st.Memory)
	idle := "never"
	if st.IdleUnloadS > 0 {
		idle = "after " + (time.Duration(st.IdleUnloadS * float64(time.Second))).String() + " without a decision"
	}
	fmt.Fprintf(w, "unload:    %s\n", idle)
	fmt.Fprintf(w, "requests:  %d served, %d failed, %d queued\n", st.RequestsServed, st.RequestsFailed, st.Queued)
	fmt.Fprintf(w, "latency:   p50 %.1f ms, p99 %.1f ms\n", st.LatencyP50MS, st.LatencyP99MS)
	fmt.Fprintf(w, "uptime:    %s (pid %d)\n", (time.Duration(st.UptimeS) * time.Second).String(), st.PID)
}

// printMemory writes status's memory lines: what the daemon holds, what the
// fit check found, what the machine has.
func printMemory(w io.Writer, m *api.MemoryStatus) {
	fmt.Fprintf(w, "memory:    %s resident: weights %s, prefix cache %s of %s, scratch %s of %s\n",
		mb(m.Resident), mb(m.Weights), mb(m.Cache), mb(m.CacheLimit), mb(m.Scratch), mb(m.ScratchLimit))
	if m.Needs > 0 || m.Available > 0 {
		line := fmt.Sprintf("fit:       the model needs %s at the limits; %s available", mb(m.Needs), mb(m.Available))
		if m.GPUWorkingSet > 0 {
			line += fmt.Sprintf("; GPU working set %s", mb(m.GPUWorkingSet))
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

// mb writes a byte count in megabytes, or gigabytes from 1 GB.
func mb(n int64) string {
	if n >= 1e9 {
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	}
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}

// pullProgressText says how far a pull in the daemon is: bytes, total,
// percentage, rate, time left and the file being fetched.
func pullProgressText(p *api.LoadProgress) string {
	s := hub.FormatBytes(p.Done)
	if p.Total > 0 {
		s += fmt.Sprintf(" of %s (%.0f%%)", hub.FormatBytes(p.Total), 100*float64(p.Done)/float64(p.Total))
	}
	if p.Rate > 0 {
		s += fmt.Sprintf(", %s/s", hub.FormatBytes(int64(p.Rate)))
	}
	if p.ETAS > 0 {
		s += fmt.Sprintf(", %s left", (time.Duration(p.ETAS) * time.Second).String())
	}
	if p.File != "" {
		s += ", fetching " + p.File
	}
	return s
}
