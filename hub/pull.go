package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/startlux/startlux/human"
)

// PullOptions tune a download.
type PullOptions struct {
	// Progress, if set, is told how the download goes: at the start and
	// end of every file and at most every 100 ms in between. It is called
	// from the downloading goroutine and must not block.
	Progress func(Progress)
	// FreeSpace reports the bytes free on the file system of a directory
	// (statfs when nil; a negative figure skips the check).
	FreeSpace func(dir string) (int64, error)
	// Now is the clock for rates and the record's date (time.Now when nil).
	Now func() time.Time
}

// SpaceMargin is the free space a pull leaves on the disk beyond the files
// it still has to fetch.
const SpaceMargin = 64 << 20

// The files of a pull in progress, in its hidden sibling directory.
const (
	stateFile = "startlux-pull.json" // the repo and commit being fetched
	lockFile  = "startlux-pull.lock" // flock'd while a pull runs
	partExt   = ".part"              // a file being fetched
)

// PartialDir returns the hidden sibling directory a pull into dir downloads
// into (where an interrupted pull's files wait for it to resume).
func PartialDir(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".pull")
}

// RemovePartial deletes what an interrupted pull into dir left in
// [PartialDir] and returns the bytes it held; (0, nil) when there is
// nothing. It refuses while a pull into dir runs, and refuses a directory
// that is not a pull's.
func RemovePartial(dir string) (int64, error) {
	tmp := PartialDir(dir)
	if _, err := os.Lstat(tmp); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if fi, err := os.Lstat(filepath.Join(tmp, stateFile)); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s is not a pull in progress (no %s); it was left alone", tmp, stateFile)
	}
	unlock, err := lockDir(tmp)
	if err != nil {
		return 0, err
	}
	defer unlock()
	n := TreeSize(os.DirFS(tmp))
	return n, os.RemoveAll(tmp)
}

// pullState is the content of stateFile.
type pullState struct {
	Repo   string `json:"repo"`
	Commit string `json:"commit"`
}

// Pull resolves ref and downloads it into dir, as [Client.Resolve] and
// [Client.Download] do.
func (c *Client) Pull(ctx context.Context, ref Ref, dir string, opts PullOptions) (*Source, error) {
	p, err := c.Resolve(ctx, ref)
	if err != nil {
		return nil, err
	}
	return c.Download(ctx, p, dir, opts)
}

// Download fetches the plan's files into dir, which must not exist (an
// error matching [ErrExists] otherwise). The files go to [PartialDir]
// first; a pull of the same commit that was interrupted resumes there (a
// different commit's leftovers are discarded). Each file is checked
// against its size and hash, the provenance record [SourceFile] is written,
// and the directory is renamed to dir: dir appears only when complete. An
// error leaves the partial directory for the next attempt, except for a
// file that failed its check, which is deleted. Download fills in p what the
// file list lacked (sizes, hashes from the headers); one Download at a time
// may use a Plan.
func (c *Client) Download(ctx context.Context, p *Plan, dir string, opts PullOptions) (*Source, error) {
	src, err := c.download(ctx, p, dir, opts)
	return src, c.redact(err)
}

func (c *Client) download(ctx context.Context, p *Plan, dir string, opts PullOptions) (_ *Source, err error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.FreeSpace == nil {
		opts.FreeSpace = freeSpace
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("%s: %w", dir, ErrExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	tmp := PartialDir(dir)
	if err := prepareTmp(tmp, p); err != nil {
		return nil, err
	}
	unlock, err := lockDir(tmp)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// What is on disk already: whole files, and parts to resume.
	present := make([]int64, len(p.Files))
	var have int64
	for i, f := range p.Files {
		present[i] = onDisk(tmp, f)
		have += present[i]
	}
	need := p.Bytes() - have
	if free, err := opts.FreeSpace(parent); err != nil {
		return nil, err
	} else if free >= 0 && free < need+SpaceMargin {
		return nil, fmt.Errorf("%w in %s: the pull needs %s more (plus %s to spare), %s are free",
			ErrNoSpace, parent, human.Size(need), human.Size(SpaceMargin), human.Size(free))
	}

	tr := newTracker(opts.Progress, opts.Now, Progress{Repo: p.Repo, Commit: p.Commit, Files: len(p.Files),
		Done: have, Total: p.Bytes(), Resumed: have})
	for i := range p.Files {
		f := &p.Files[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		final := filepath.Join(tmp, filepath.FromSlash(f.Name))
		if f.Size >= 0 && present[i] == f.Size && fileSize(final) == f.Size {
			tr.startFile(*f, f.Size)
			tr.endFile()
			continue
		}
		if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
			return nil, err
		}
		tr.startFile(*f, present[i])
		if data, ok := p.small[f.Name]; ok {
			if err := writeFile(final, data); err != nil {
				return nil, err
			}
			tr.add(int64(len(data)) - present[i])
		} else if err := c.fetchFile(ctx, p, f, final, tr); err != nil {
			return nil, fmt.Errorf("%s@%s: %w", p.Repo, human.Commit(p.Commit), err)
		}
		tr.endFile()
	}

	src := p.source(opts.Now())
	rec, err := json.MarshalIndent(src, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(tmp, SourceFile), append(rec, '\n')); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dir); err == nil {
		return nil, fmt.Errorf("%s: %w (it appeared during the pull, whose files are in %s)", dir, ErrExists, tmp)
	}
	for _, n := range []string{stateFile, lockFile} {
		if err := os.Remove(filepath.Join(tmp, n)); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	syncDir(parent)
	tr.finish()
	return src, nil
}

// prepareTmp makes the partial directory for p, keeping what an
// interrupted pull of the same commit left and discarding anything else.
func prepareTmp(tmp string, p *Plan) error {
	want := pullState{Repo: p.Repo, Commit: p.Commit}
	if data, err := os.ReadFile(filepath.Join(tmp, stateFile)); err == nil {
		var st pullState
		if json.Unmarshal(data, &st) == nil && st == want {
			return nil
		}
	}
	if _, err := os.Lstat(tmp); err == nil {
		// Leftovers of another commit (or of something else): only a
		// pull's own directory is ever removed.
		if _, err := os.Stat(filepath.Join(tmp, stateFile)); err != nil {
			return fmt.Errorf("%s is in the way: it is not a pull in progress (no %s); remove it", tmp, stateFile)
		}
		unlock, err := lockDir(tmp)
		if err != nil {
			return err
		}
		unlock()
		if err := os.RemoveAll(tmp); err != nil {
			return err
		}
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return err
	}
	data, _ := json.Marshal(want)
	return writeFile(filepath.Join(tmp, stateFile), data)
}

// onDisk returns the bytes of f already in the partial directory: the whole
// file when it is there at its size, else what its .part holds.
func onDisk(tmp string, f File) int64 {
	final := filepath.Join(tmp, filepath.FromSlash(f.Name))
	if n := fileSize(final); n >= 0 && (f.Size < 0 || n == f.Size) {
		return n
	}
	if n := fileSize(final + partExt); n >= 0 && (f.Size < 0 || n <= f.Size) {
		return n
	}
	return 0
}

// fileSize returns the size of the regular file at name, -1 when there is
// none.
func fileSize(name string) int64 {
	fi, err := os.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return -1
	}
	return fi.Size()
}

// fetchFile downloads f into final through final+".part", resuming the part
// with a Range request and retrying transient failures.
func (c *Client) fetchFile(ctx context.Context, p *Plan, f *File, final string, tr *tracker) error {
	part := final + partExt
	out, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	off, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if f.Size >= 0 && off > f.Size {
		if err := out.Truncate(0); err != nil {
			return err
		}
		off = 0
	}
	// The LFS hash is computed while the bytes arrive; what a resumed part
	// holds is hashed first.
	h := sha256.New()
	if off > 0 {
		if _, err := io.Copy(h, io.NewSectionReader(out, 0, off)); err != nil {
			return fmt.Errorf("%s: %w", part, err)
		}
	}
	u := c.repoURL(p.Repo, "resolve", p.Commit, escapeFile(f.Name))
	failures := 0
	for {
		if f.Size >= 0 && off == f.Size && f.Size > 0 {
			break // the part is whole: nothing to ask for
		}
		n, again, err := c.transfer(ctx, p, f, u, out, &off, h, tr)
		if err == nil {
			break
		}
		if n > 0 {
			failures = 0
		}
		failures++
		if !again || failures > c.retries || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if err := sleep(ctx, c.retryWait); err != nil {
			return err
		}
	}
	if f.Size >= 0 && off != f.Size {
		return fmt.Errorf("%w: %s: got %d bytes, the Hub says %d", ErrIntegrity, f.Name, off, f.Size)
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := c.verifyPart(f, out, off, h); err != nil {
		out.Close()
		os.Remove(part)
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(part, final)
}

// verifyPart checks the whole part against f's hash: the streamed sha256 for
// LFS files, the git blob id (read back) for the rest.
func (c *Client) verifyPart(f *File, out *os.File, size int64, h hash.Hash) error {
	switch {
	case f.SHA256 != "":
		if got := hex.EncodeToString(h.Sum(nil)); got != f.SHA256 {
			return fmt.Errorf("%w: %s: sha256 is %s, the Hub says %s", ErrIntegrity, f.Name, got, f.SHA256)
		}
	case f.LFS:
		return fmt.Errorf("%w: %s: the Hub gave no sha256 for this LFS file", ErrIntegrity, f.Name)
	case f.GitOID != "":
		g := newGitHash(size)
		if _, err := io.Copy(g, io.NewSectionReader(out, 0, size)); err != nil {
			return err
		}
		if got := hex.EncodeToString(g.Sum(nil)); got != f.GitOID {
			return fmt.Errorf("%w: %s: git blob id is %s, the Hub says %s", ErrIntegrity, f.Name, got, f.GitOID)
		}
	}
	return nil
}

// transfer makes one request for the rest of f (from *off) and appends what
// arrives to out. It returns the bytes written and whether a failure is
// worth retrying.
func (c *Client) transfer(ctx context.Context, p *Plan, f *File, u *url.URL, out *os.File, off *int64, h hash.Hash, tr *tracker) (int64, bool, error) {
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	hdr := http.Header{}
	if *off > 0 {
		hdr.Set("Range", "bytes="+strconv.FormatInt(*off, 10)+"-")
	}
	resp, _, err := c.get(actx, u, hdr, func(m meta) error { return checkMeta(p, f, m) })
	if errors.Is(err, ErrIntegrity) {
		return 0, false, err
	}
	if err != nil {
		return 0, true, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if *off > 0 {
			// The server ignored the Range: start again from byte 0.
			if err := out.Truncate(0); err != nil {
				return 0, false, err
			}
			tr.rewind(*off)
			*off = 0
			h.Reset()
		}
		if err := checkLength(f, resp.ContentLength, resp.Header.Get("Content-Encoding")); err != nil {
			return 0, false, err
		}
	case http.StatusPartialContent:
		start, total, err := parseContentRange(resp.Header.Get("Content-Range"))
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", displayURL(resp.Request.URL), err)
		}
		if start != *off {
			return 0, false, fmt.Errorf("%s: asked for bytes from %d, got a range from %d", displayURL(resp.Request.URL), *off, start)
		}
		if err := checkLength(f, total, resp.Header.Get("Content-Encoding")); err != nil {
			return 0, false, err
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// The part is as long as the file, or the file is not what the
		// part was made from: start again.
		if err := out.Truncate(0); err != nil {
			return 0, false, err
		}
		tr.rewind(*off)
		*off = 0
		h.Reset()
		return 0, true, fmt.Errorf("%s: range not satisfiable; starting the file again", f.Name)
	default:
		if retryable(resp.StatusCode) {
			return 0, true, httpError(resp)
		}
		return 0, false, c.explain(Ref{Repo: p.Repo, Revision: p.Commit}, httpError(resp))
	}
	if _, err := out.Seek(*off, io.SeekStart); err != nil {
		return 0, false, err
	}
	// A transfer that receives nothing for c.stall is abandoned.
	var stalled atomic.Bool
	watchdog := time.AfterFunc(c.stall, func() { stalled.Store(true); cancel() })
	defer watchdog.Stop()
	var written int64
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			watchdog.Reset(c.stall)
			if f.Size >= 0 && *off+int64(n) > f.Size {
				return written, false, fmt.Errorf("%w: %s: the server sends more than the %d bytes the Hub lists", ErrIntegrity, f.Name, f.Size)
			}
			if _, err := out.Write(buf[:n]); err != nil {
				return written, false, fmt.Errorf("%s: %w", out.Name(), err)
			}
			h.Write(buf[:n])
			*off += int64(n)
			written += int64(n)
			tr.add(int64(n))
		}
		if rerr == io.EOF {
			if f.Size >= 0 && *off < f.Size {
				return written, true, fmt.Errorf("%s: the transfer ended at byte %d of %d", f.Name, *off, f.Size)
			}
			return written, false, nil
		}
		if rerr != nil {
			if stalled.Load() {
				return written, true, fmt.Errorf("%s: no data for %v at byte %d", f.Name, c.stall, *off)
			}
			return written, true, fmt.Errorf("%s: at byte %d: %w", f.Name, *off, stripURLError(rerr))
		}
	}
}

// checkLength checks a response's length (-1: unknown) and encoding
// against f, filling in f's size when the file list lacked it.
func checkLength(f *File, n int64, encoding string) error {
	if encoding != "" && encoding != "identity" {
		return fmt.Errorf("%s: the server sent it %s-encoded although identity was asked for", f.Name, encoding)
	}
	if n < 0 {
		return nil
	}
	if f.Size >= 0 && n != f.Size {
		return fmt.Errorf("%w: %s: the server sends %d bytes, the Hub lists %d", ErrIntegrity, f.Name, n, f.Size)
	}
	f.Size = n
	return nil
}

// parseContentRange reads "bytes START-END/TOTAL" (TOTAL "*": -1).
func parseContentRange(s string) (start, total int64, err error) {
	bad := fmt.Errorf("bad Content-Range %q", s)
	rest, ok := strings.CutPrefix(s, "bytes ")
	if !ok {
		return 0, 0, bad
	}
	rng, tot, ok := strings.Cut(rest, "/")
	if !ok {
		return 0, 0, bad
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return 0, 0, bad
	}
	start, err1 := strconv.ParseInt(a, 10, 64)
	end, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || start < 0 || end < start {
		return 0, 0, bad
	}
	total = -1
	if tot != "*" {
		if total, err = strconv.ParseInt(tot, 10, 64); err != nil || total <= end {
			return 0, 0, bad
		}
	}
	return start, total, nil
}

// newGitHash returns a hash that, fed a blob of size bytes, sums to its git
// blob id.
func newGitHash(size int64) hash.Hash {
	h := sha1.New()
	h.Write([]byte("blob " + strconv.FormatInt(size, 10) + "\x00"))
	return h
}

// writeFile writes data to name and syncs it.
func writeFile(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir flushes a directory's entries (best effort: a rename is durable
// once its directory is).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
