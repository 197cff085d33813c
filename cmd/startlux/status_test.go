package main

import (
	"strings"
	"testing"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/ipc"
)

// TestStatusBackendNote: the backend note travels as model.backend_note
// (absent when empty) and startlux status prints it under the backend.
func TestStatusBackendNote(t *testing.T) {
	note := "Metal disabled: attention kernel differs from the CPU by 5.0e-01 at head 0 of token 8"
	for _, c := range []struct {
		note     string
		wantLine string // "" when no note line is printed
	}{
		{note, "backend:   cpu (openblas)\nnote:      " + note + "\n"},
		{"", ""},
	} {
		st := api.Status{State: api.StateReady, Model: api.ModelStatus{Name: "demo", Backend: "cpu (openblas)", BackendNote: c.note}}
		raw, err := ipc.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var wire map[string]any
		if err := ipc.Unmarshal(raw, &wire); err != nil {
			t.Fatal(err)
		}
		m, _ := wire["model"].(map[string]any)
		got, present := m["backend_note"]
		if present != (c.note != "") || (present && got != c.note) {
			t.Errorf("note %q on the wire: %v (present %v)", c.note, got, present)
		}
		var back api.Status
		if err := ipc.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		printStatus(&b, &back)
		if c.wantLine != "" && !strings.Contains(b.String(), c.wantLine) || c.wantLine == "" && strings.Contains(b.String(), "note:") {
			t.Errorf("note %q printed as:\n%s", c.note, b.String())
		}
	}
}
