package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/startlux/startlux/api"
)

// doctorFields are the report's sections and the fields each must carry
// (issue 19's list: OS and architecture; the backend auto picks and why;
// Metal device, GPU family, recommendedMaxWorkingSetSize, the library; the
// BLAS library and its sgemm rate; the int8 kernel; the socket, its
// directory's owner and mode; whether a daemon answers and its status; the
// login item; the models folder and each model; the self-check per kernel
// family). Every section has a status.
var doctorFields = map[string][]string{
	"system":     {"os", "arch", "cpus", "go_version"},
	"backend":    {"auto", "why"},
	"metal":      {"device", "gpu_families", "recommended_max_working_set_size", "max_buffer_length", "library", "emulator"},
	"blas":       {"library", "sgemm_shape", "sgemm_gflops"},
	"int8":       {"backend", "kernel"},
	"self_check": {"on", "families", "model", "elapsed_ms"},
	"socket":     {"path", "dir", "kind", "dir_exists", "dir_owner_uid", "socket_exists"},
	"daemon":     {"answers", "daemon_status"},
	"login_item": {"source", "items"},
	"models":     {"dir", "models"},
}

// doctorJSON runs "startlux doctor --json" and checks that every field is
// there and every status is ok or failed (with a reason when failed).
func doctorJSON(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	out, err := runCmd(t, nil, append([]string{"doctor", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("doctor: %v", err)
	}
	var r map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	for section, fields := range doctorFields {
		s, ok := r[section]
		if !ok {
			t.Errorf("no section %q", section)
			continue
		}
		switch s["status"] {
		case "ok":
		case "failed":
			if r, _ := s["reason"].(string); r == "" {
				t.Errorf("%s failed without a reason", section)
			}
		default:
			t.Errorf("%s: status %v", section, s["status"])
		}
		for _, f := range fields {
			if _, ok := s[f]; !ok {
				t.Errorf("%s has no field %q", section, f)
			}
		}
	}
	if len(r) != len(doctorFields) {
		t.Errorf("%d sections, want %d", len(r), len(doctorFields))
	}
	return r
}

// TestDoctor runs doctor with no daemon on the socket, then with one
// serving: both times every field is there; the daemon check fails and
// then reports the daemon's status; no failure stops the command.
func TestDoctor(t *testing.T) {
	home := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, "config"))
	t.Setenv("XDG_DATA_HOME", filepath.Join(home, "data"))
	sock := filepath.Join(t.TempDir(), "s.sock")
	r := doctorJSON(t, "--socket", sock, "--no-emulator")
	if d := r["daemon"]; d["status"] != "failed" || d["answers"] != false || d["daemon_status"] != nil ||
		!strings.Contains(d["reason"].(string), "no daemon answers at "+sock) {
		t.Errorf("no daemon: %v", d)
	}
	if s := r["socket"]; s["path"] != sock || s["dir_exists"] != true || s["status"] != "ok" {
		t.Errorf("socket: %v", s)
	}
	if s := r["system"]; s["os"] != runtime.GOOS || s["arch"] != runtime.GOARCH {
		t.Errorf("system: %v", s)
	}
	if i := r["int8"]; i["status"] != "ok" || i["kernel"] == "" || !strings.HasPrefix(i["backend"].(string), "cpu") && runtime.GOOS != "darwin" {
		t.Errorf("int8: %v", i)
	}
	if runtime.GOOS != "darwin" {
		// Off a Mac the self-check runs under the emulator, which
		// --no-emulator leaves out: reported, not fatal.
		if sc := r["self_check"]; sc["status"] != "failed" || !strings.Contains(sc["reason"].(string), "--no-emulator") || sc["families"] == nil {
			t.Errorf("self-check: %v", sc)
		}
	}
	if m := r["models"]; m["dir"] != filepath.Join(home, "data", "startlux", "models") {
		t.Errorf("models: %v", m)
	}
	if runtime.GOOS != "darwin" {
		if m := r["metal"]; m["status"] != "failed" || !strings.Contains(m["reason"].(string), "no Metal: not macOS") {
			t.Errorf("metal off macOS: %v", m)
		}
		if b := r["backend"]; !strings.HasPrefix(b["auto"].(string), "cpu") {
			t.Errorf("backend: %v", b)
		}
	}

	live, _ := startServe(t)
	deadline := time.Now().Add(60 * time.Second)
	for {
		r = doctorJSON(t, "--socket", live, "--no-emulator")
		st, _ := r["daemon"]["daemon_status"].(map[string]any)
		if r["daemon"]["status"] == "ok" && st["state"] == api.StateReady {
			if r["daemon"]["answers"] != true || st["pid"] == nil {
				t.Errorf("daemon: %v", r["daemon"])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not report ready within 60s: %v", r["daemon"])
		}
		time.Sleep(200 * time.Millisecond)
	}
	if s := r["socket"]; s["socket_exists"] != true || s["socket_mode"] != "0600" || s["status"] != "ok" {
		t.Errorf("socket with a daemon: %v", s)
	}
	out, err := runCmd(t, nil, "doctor", "--socket", live, "--no-emulator")
	if err != nil || !strings.Contains(out, "daemon       ok      ready, model") {
		t.Errorf("text report (%v):\n%s", err, out)
	}
}
