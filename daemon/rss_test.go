package daemon

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/startlux/startlux"
	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/cpu"
	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/ipc"
	"github.com/vmihailenco/msgpack/v5"
)

// daemonEnv names the socket a re-executed test binary serves the demo
// model on (see TestMain), so that its memory can be measured alone;
// daemonModelEnv, when set, names the checkpoint it serves instead;
// daemonNoWarmupEnv, when set, turns its warm-up off.
const (
	daemonEnv         = "STARTLUX_TEST_DAEMON"
	daemonModelEnv    = "STARTLUX_TEST_DAEMON_MODEL"
	daemonNoWarmupEnv = "STARTLUX_TEST_DAEMON_NO_WARMUP"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(daemonEnv); sock != "" {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { // the test closes stdin to stop us
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
		err := Run(ctx, RunOptions{Socket: sock, Daemon: Options{Load: DecideLoader(LoaderOptions{}), ModelsDir: filepath.Dir(sock), Model: os.Getenv(daemonModelEnv), NoWarmup: os.Getenv(daemonNoWarmupEnv) != ""},
			Listening: func(string) { fmt.Println("listening") }})
		if err != nil {
			fmt.Println("daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// rssDaemon is a daemon in a process of its own.
type rssDaemon struct {
	pid  int
	sock string
}

// startRSSDaemon runs the demo daemon in a fresh process and waits until its
// model is ready.
func startRSSDaemon(t testing.TB) *rssDaemon { return startRSSDaemonOn(t, "", api.StateReady) }

// startRSSDaemonOn runs the daemon of the checkpoint in model ("" for the
// demo) in a fresh process and waits until its state is want (ready, or
// failed for a model that cannot load).
func startRSSDaemonOn(t testing.TB, model, want string) *rssDaemon {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("peak memory is read from /proc/PID/status (Linux)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "run", "d.sock")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonEnv+"="+sock, daemonModelEnv+"="+model)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "listening" {
		t.Fatalf("the daemon process said %q (%v)", line, err)
	}
	c, err := ipc.Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var st api.Status
		if err := c.Call(context.Background(), api.MethodStatus, nil, &st); err != nil {
			t.Fatal(err)
		}
		if st.State == want {
			break
		}
		if st.State == api.StateFailed || time.Now().After(deadline) {
			t.Fatalf("the daemon process is not %s: %+v", want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &rssDaemon{pid: cmd.Process.Pid, sock: sock}
}

// memory returns the process's resident memory now and its peak, in bytes
// (VmRSS and VmHWM).
func (d *rssDaemon) memory(t testing.TB) (rss, peak int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = kb << 10
			case "VmHWM:":
				peak = kb << 10
			}
		}
	}
	return rss, peak
}

// send sends n copies of a request at once, each on its own connection,
// and returns the error codes they got ("" for an answer).
func (d *rssDaemon) send(t testing.TB, req msgpack.RawMessage, n int) []api.Code {
	t.Helper()
	codes := make([]api.Code, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := ipc.Dial(context.Background(), d.sock)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			var resp api.Response
			if err := c.Call(ctx, api.MethodDecide, req, &resp); err != nil {
				codes[i] = api.ErrorCode(err)
				if codes[i] != api.CodeInvalidParams && codes[i] != api.CodeOverloaded {
					t.Errorf("request %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
	return codes
}

// maximalRequests builds, with the demo model itself, the in-limit requests
// that take the most of what the limits bound, and one just over them:
//   - evidence: rendered evidence just under the position limit, with as
//     many questions as max_request_tokens then allows (the most evidence
//     and rows held at once);
//   - bytes: the same with evidence of the vocabulary's longest tokens (the
//     most bytes per token);
//   - compute: max_questions questions of their own instructions, rows
//     together just under max_request_tokens (the most tokens computed);
//   - refused: 60 MiB of evidence, inside the frame limit (the request of
//     the report that took a daemon to 4.8 GB).
func maximalRequests(t testing.TB, names ...string) map[string]msgpack.RawMessage {
	t.Helper()
	be, err := cpu.New(cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := decide.OpenFS(startlux.DemoModel(), DemoPath, be, decide.Options{CacheLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	lim := e.Limits()
	tokens := func(js string) (int, bool) {
		r, err := decide.ParseJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Prepare(r)
		if err != nil {
			return 0, false
		}
		return p.Tokens(), true
	}
	// largest returns about the largest n for which build(n) is in limits:
	// tokens grow linearly with n, so two sizes give the slope, and the
	// guess is stepped down until it fits.
	largest := func(build func(n int) string, limit int) int {
		t1, ok1 := tokens(build(1))
		t2, ok2 := tokens(build(17))
		if !ok1 || !ok2 || t2 <= t1 {
			t.Fatalf("the request shapes do not grow: %d (%v), %d (%v): %.200s", t1, ok1, t2, ok2, build(17))
		}
		n := 1 + 16*(limit-t1)/(t2-t1)
		for ; n > 1; n = n * 97 / 100 {
			if _, ok := tokens(build(n)); ok {
				return n
			}
		}
		return 1
	}
	questions := func(n int, long string) string {
		qs := make([]string, n)
		for i := range qs {
			qs[i] = fmt.Sprintf(`"q%d": {"type": "noul", "instructions": "Question %d%s?"}`, i, i, long)
		}
		return "{" + strings.Join(qs, ", ") + "}"
	}
	withEvidence := func(unit string) string {
		req := func(n, q int) string {
			return `{"evidence": "` + strings.Repeat(unit, n) + `", "questions": ` + questions(q, "") + `}`
		}
		n := largest(func(n int) string { return req(n, 1) }, lim.MaxEvidenceTokens-64)
		row, _ := tokens(req(n, 1))
		return req(n, min(lim.MaxQuestions, lim.MaxRequestTokens/row))
	}
	compute := func() string {
		q := func(n int) string {
			return `{"evidence": {"list": [1, 2, 3]}, "questions": ` + questions(lim.MaxQuestions, strings.Repeat(" is the item red or blue", n)) + `}`
		}
		return q(largest(q, lim.MaxRequestTokens))
	}
	builders := map[string]func() string{
		"evidence": func() string { return withEvidence("the quick brown fox jumps over the lazy dog ") },
		"bytes":    func() string { return withEvidence("🚨🚨🚨🚨🚨🚨🚨🚨🚨🚨") },
		"compute":  compute,
		"refused": func() string {
			return `{"evidence": {"note": "` + strings.Repeat("x", 60<<20) + `"}, "questions": ` + questions(1, "") + `}`
		},
	}
	out := map[string]msgpack.RawMessage{}
	for _, name := range names {
		js := builders[name]()
		if name != "refused" {
			n, ok := tokens(js)
			if !ok {
				t.Fatalf("the %s request is not in the limits", name)
			}
			t.Logf("the %s request: %d bytes, %d tokens", name, len(js), n)
		}
		raw, err := ipc.FromJSON([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = raw
	}
	return out
}

// TestPeakRSS measures the demo daemon's peak resident memory over the
// maximal in-limit request that is quick to answer (the most evidence) and
// the 60 MiB one the limits refuse, one after the other in one fresh
// process: it must stay under 1.5 GB, and the memory they took must be
// given back. BenchmarkPeakRSS adds the other maximal requests (the most
// bytes per token, the most tokens to compute) and twelve of each at once.
func TestPeakRSS(t *testing.T) {
	reqs := maximalRequests(t, "evidence", "refused")
	d := startRSSDaemon(t)
	base, _ := d.memory(t)
	for _, name := range []string{"evidence", "refused"} {
		codes := d.send(t, reqs[name], 1)
		if want := map[bool]api.Code{true: api.CodeInvalidParams, false: ""}[name == "refused"]; codes[0] != want {
			t.Errorf("the %s request: code %q, want %q", name, codes[0], want)
		}
		rss, peak := d.memory(t)
		t.Logf("after the %s request: resident %d MB, peak %d MB", name, rss>>20, peak>>20)
	}
	_, peak := d.memory(t)
	if peak > 1500<<20 {
		t.Errorf("peak resident memory %d MB, want at most 1500 MB", peak>>20)
	}
	// Given back: within a few seconds resident memory is near what the
	// idle daemon held.
	var rss int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		rss, _ = d.memory(t)
		if rss <= base+256<<20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("idle %d MB, peak %d MB, %d MB after the requests", base>>20, peak>>20, rss>>20)
	if rss > base+256<<20 {
		t.Errorf("resident memory %d MB 10 s after the requests, the idle daemon held %d MB", rss>>20, base>>20)
	}
}

// BenchmarkPeakRSS reports the demo daemon's peak resident memory (VmHWM,
// in MB) for each maximal request alone and twelve at once, each in a fresh
// process (go test ./daemon -run '^$' -bench PeakRSS -benchtime 1x). The
// goals: at most 1500 MB for one, 3000 MB for twelve.
func BenchmarkPeakRSS(b *testing.B) {
	reqs := maximalRequests(b, "evidence", "bytes", "compute", "refused")
	for _, c := range []struct {
		name string
		n    int
	}{{"evidence", 1}, {"bytes", 1}, {"refused", 1}, {"compute", 1}, {"evidence", 12}, {"bytes", 12}, {"refused", 12}} {
		b.Run(fmt.Sprintf("%s-x%d", c.name, c.n), func(b *testing.B) {
			var peak int64
			var refused int
			for range b.N {
				d := startRSSDaemon(b)
				for _, code := range d.send(b, reqs[c.name], c.n) {
					if code == api.CodeOverloaded {
						refused++
					}
				}
				_, p := d.memory(b)
				peak = max(peak, p)
			}
			b.ReportMetric(float64(peak)/1e6, "peak-MB")
			b.ReportMetric(float64(refused)/float64(b.N), "overloaded/op")
		})
	}
}
