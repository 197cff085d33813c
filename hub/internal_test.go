package hub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestTrackerRate drives the progress tracker with a fake clock: the rate
// is the bytes received over the last window, the ETA what is left at it,
// and reports are spaced except on file boundaries.
func TestTrackerRate(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	var got []Progress
	tr := newTracker(func(p Progress) { got = append(got, p) }, func() time.Time { return now },
		Progress{Total: 10_000_000, Done: 1_000_000, Resumed: 1_000_000})
	tr.startFile(File{Name: "w", Size: 9_000_000}, 0)
	if len(got) != 1 || got[0].Rate != 0 || got[0].ETA != 0 {
		t.Fatalf("first report %+v", got)
	}
	// 1 MB every 500 ms: 2 MB/s.
	for i := 1; i <= 8; i++ {
		now = t0.Add(time.Duration(i) * 500 * time.Millisecond)
		tr.add(1_000_000)
	}
	last := got[len(got)-1]
	if last.Done != 9_000_000 || last.FileDone != 8_000_000 {
		t.Fatalf("last report %+v", last)
	}
	if last.Rate != 2e6 {
		t.Errorf("rate %v, want 2e6", last.Rate)
	}
	if last.ETA != 500*time.Millisecond {
		t.Errorf("ETA %v, want 500ms (1 MB at 2 MB/s)", last.ETA)
	}
	// The rate looks back rateWindow only: after a stall it falls.
	now = now.Add(4 * time.Second)
	tr.add(1)
	if p := got[len(got)-1]; !(p.Rate < 2e6 && p.Rate > 0) {
		t.Errorf("rate after a stall %v, want below 2e6", p.Rate)
	}
	// Reports inside reportEvery are merged, boundaries are not.
	n := len(got)
	now = now.Add(time.Millisecond)
	tr.add(1)
	if len(got) != n {
		t.Errorf("a report %v after the previous one", time.Millisecond)
	}
	tr.endFile()
	tr.finish()
	if len(got) != n+2 || !got[len(got)-1].Finished || got[len(got)-1].FilesDone != 1 {
		t.Errorf("end reports %+v", got[n:])
	}
}

// TestRedirects checks which hops of a redirect chain get the token and
// whose headers count as the Hub's, and that https→http is refused.
func TestRedirects(t *testing.T) {
	const token = "hf_tok"
	var storageAuth, hubAuth []string
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		storageAuth = append(storageAuth, r.Header.Get("Authorization"))
		w.Header().Set("ETag", `"storage-etag"`)
		w.Header().Set("X-Repo-Commit", "not-the-hub")
		w.Write([]byte("data"))
	}))
	defer storage.Close()
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hubAuth = append(hubAuth, r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/old/x/resolve/main/f": // a renamed repository: relative
			w.Header().Set("Location", "/new/x/resolve/main/f")
			w.WriteHeader(http.StatusTemporaryRedirect)
		case "/new/x/resolve/main/f": // an LFS file: to the storage host
			w.Header().Set("X-Repo-Commit", "abc")
			w.Header().Set("X-Linked-Etag", `"`+strings.Repeat("a", 64)+`"`)
			w.Header().Set("X-Linked-Size", "4")
			w.Header().Set("ETag", `W/"pointer"`)
			w.Header().Set("Location", storage.URL+"/blob?sig=1")
			w.WriteHeader(http.StatusFound)
		}
	}))
	defer hub.Close()
	c, err := NewClient(Options{Endpoint: hub.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(hub.URL + "/old/x/resolve/main/f")
	var vetted meta
	resp, m, err := c.get(context.Background(), u, nil, func(m meta) error { vetted = m; return nil })
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := []string{"Bearer " + token, "Bearer " + token}; strings.Join(hubAuth, ",") != strings.Join(want, ",") {
		t.Errorf("the Hub got %q", hubAuth)
	}
	if len(storageAuth) != 1 || storageAuth[0] != "" {
		t.Errorf("the storage host got %q", storageAuth)
	}
	if m.commit != "abc" || m.linkedEtag != strings.Repeat("a", 64) || m.linkedSize != 4 || m.etag != "" || vetted != m {
		t.Errorf("metadata %+v (vetted %+v)", m, vetted)
	}

	// https → http is refused.
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, storage.URL+"/blob", http.StatusFound)
	}))
	defer tls.Close()
	c, _ = NewClient(Options{Endpoint: tls.URL, Token: token, HTTP: tls.Client()})
	u, _ = url.Parse(tls.URL + "/x/resolve/main/f")
	before := len(storageAuth)
	if _, _, err := c.get(context.Background(), u, nil, nil); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("https→http: %v", err)
	}
	if len(storageAuth) != before {
		t.Error("the http host was asked")
	}
}

// TestStall abandons a transfer that stops sending.
func TestStall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("0123456789"))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never sends the rest
	}))
	defer srv.Close()
	c, _ := NewClient(Options{Endpoint: srv.URL, StallTimeout: 50 * time.Millisecond, Retries: -1})
	p := &Plan{Repo: "o/n", Commit: "c"}
	f := &File{Name: "f", Size: 1000}
	err := c.fetchFile(context.Background(), p, f, t.TempDir()+"/f", newTracker(nil, time.Now, Progress{}))
	if err == nil || !strings.Contains(err.Error(), "no data for 50ms at byte 10") {
		t.Errorf("error %v", err)
	}
}

func TestParseContentRange(t *testing.T) {
	cases := []struct {
		in           string
		start, total int64
		ok           bool
	}{
		{"bytes 100-199/200", 100, 200, true},
		{"bytes 0-0/1", 0, 0 + 1, true},
		{"bytes 5-9/*", 5, -1, true},
		{"bytes 5-9/9", 0, 0, false},
		{"bytes 9-5/20", 0, 0, false},
		{"items 0-1/2", 0, 0, false},
		{"bytes */200", 0, 0, false},
	}
	for _, c := range cases {
		s, tot, err := parseContentRange(c.in)
		if c.ok != (err == nil) || (c.ok && (s != c.start || tot != c.total)) {
			t.Errorf("parseContentRange(%q) = %d, %d, %v", c.in, s, tot, err)
		}
	}
}
