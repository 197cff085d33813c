// Package hubtest serves model repositories in the Hugging Face Hub's URL
// layout, for tests of code that pulls from the Hub: the revision API with
// file metadata, resolve URLs with the Hub's headers, LFS files redirected
// to a second server standing for the Hub's storage host, byte ranges, and
// faults on demand (cut transfers, ignored ranges, wrong hashes, error
// statuses). Every request is recorded.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Repo is one repository the server holds, at one commit.
type Repo struct {
	// ID is "owner/name".
	ID string
	// Commit is the commit every revision of Revisions resolves to.
	Commit string
	// Revisions are the branch and tag names that resolve to Commit
	// ("main" when nil); Commit itself always does.
	Revisions []string
	// Files are the repository's files by slash-separated path.
	Files map[string][]byte
	// LFS marks the files stored with Git LFS (nil: *.safetensors, *.bin,
	// *.gguf and any file over 1 MiB).
	LFS func(name string) bool
	// Token, when set, makes the repository private: requests need
	// "Authorization: Bearer Token".
	Token string
	// Gated repositories need Token for their files (their file list is
	// public), and say so (GatedRepo) instead of pretending not to exist.
	Gated bool
}

// Dir returns a Repo holding the files of a directory tree (hidden files
// excluded).
func Dir(t testing.TB, id, dir string) *Repo {
	t.Helper()
	r := &Repo{ID: id, Commit: fakeCommit(id), Files: map[string][]byte{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		r.Files[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fakeCommit makes a stable 40-hex commit id for a repository.
func fakeCommit(id string) string {
	s := sha1.Sum([]byte("commit of " + id))
	return hex.EncodeToString(s[:])
}

func (r *Repo) isLFS(name string) bool {
	if r.LFS != nil {
		return r.LFS(name)
	}
	switch path.Ext(name) {
	case ".safetensors", ".bin", ".gguf":
		return true
	}
	return len(r.Files[name]) > 1<<20
}

func (r *Repo) resolves(rev string) bool {
	if rev == r.Commit {
		return true
	}
	revs := r.Revisions
	if revs == nil {
		revs = []string{"main"}
	}
	for _, v := range revs {
		if v == rev {
			return true
		}
	}
	return false
}

// Request is one request a server received.
type Request struct {
	// Storage is true for requests to the storage host.
	Storage bool
	// Path is the URL path (unescaped), Query its raw query.
	Path, Query string
	// Range and Auth are the Range and Authorization headers as received.
	Range, Auth string
	// Status is the status answered.
	Status int
}

// Server is a fake Hub and its storage host.
type Server struct {
	// Hub is the endpoint (HF_ENDPOINT); Storage the host LFS files are
	// redirected to.
	Hub, Storage *httptest.Server

	mu      sync.Mutex // guards the fields below
	repos   map[string]*Repo
	renamed map[string]string
	log     []Request
	cuts    map[string][]int64 // file → byte counts after which the next transfers break off
	noRange map[string]bool
	badSHA  map[string]string // file → the sha256 the Hub claims
	hdrSHA  map[string]string // file → the X-Linked-Etag claimed (the file list stays right)
	fail    map[string][]int  // path suffix → statuses answered to the next requests
	echo    bool
}

// NewServer starts a fake Hub serving repos; it is closed when the test
// ends.
func NewServer(t testing.TB, repos ...*Repo) *Server {
	s := &Server{repos: map[string]*Repo{}, renamed: map[string]string{}, cuts: map[string][]int64{},
		noRange: map[string]bool{}, badSHA: map[string]string{}, hdrSHA: map[string]string{}, fail: map[string][]int{}}
	for _, r := range repos {
		s.repos[r.ID] = r
	}
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.Storage = httptest.NewServer(http.HandlerFunc(s.serveStorage))
	t.Cleanup(func() {
		s.Hub.Close()
		s.Storage.Close()
	})
	return s
}

// Rename makes requests for repository old answer with a relative redirect
// to repository id, as the Hub does for a renamed repository.
func (s *Server) Rename(old, id string) {
	s.mu.Lock()
	s.renamed[old] = id
	s.mu.Unlock()
}

// CutAfter makes the next transfers of file (one per count) break off
// after that many bytes of the body: the connection is closed mid-body.
func (s *Server) CutAfter(file string, counts ...int64) {
	s.mu.Lock()
	s.cuts[file] = append(s.cuts[file], counts...)
	s.mu.Unlock()
}

// IgnoreRange makes the server answer range requests for file with the
// whole file (200), as some CDNs do.
func (s *Server) IgnoreRange(file string) {
	s.mu.Lock()
	s.noRange[file] = true
	s.mu.Unlock()
}

// WrongSHA256 makes the Hub claim a wrong sha256 for file, both in the
// file list and in X-Linked-Etag.
func (s *Server) WrongSHA256(file string) {
	h := sha256.Sum256([]byte("not the content of " + file))
	s.mu.Lock()
	s.badSHA[file] = hex.EncodeToString(h[:])
	s.mu.Unlock()
}

// HeaderSHA256 makes X-Linked-Etag claim sha for file while the file list
// keeps the right hash.
func (s *Server) HeaderSHA256(file, sha string) {
	s.mu.Lock()
	s.hdrSHA[file] = sha
	s.mu.Unlock()
}

// FailNext makes the next requests whose path ends in suffix answer the
// given statuses, one each.
func (s *Server) FailNext(suffix string, statuses ...int) {
	s.mu.Lock()
	s.fail[suffix] = append(s.fail[suffix], statuses...)
	s.mu.Unlock()
}

// EchoAuthorization makes error messages repeat the Authorization header
// received (a badly behaved server; the client must not pass it on).
func (s *Server) EchoAuthorization() {
	s.mu.Lock()
	s.echo = true
	s.mu.Unlock()
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// SHA256 returns the hex sha256 of data.
func SHA256(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// GitOID returns git's blob id of data.
func GitOID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// statusWriter records the status answered.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) record(storage bool, r *http.Request, w *statusWriter) {
	s.mu.Lock()
	s.log = append(s.log, Request{Storage: storage, Path: r.URL.Path, Query: r.URL.RawQuery,
		Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization"), Status: w.status})
	s.mu.Unlock()
}

// failing pops the status the next request for p must answer, 0 for none.
func (s *Server) failing(p string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for suffix, sts := range s.fail {
		if strings.HasSuffix(p, suffix) && len(sts) > 0 {
			s.fail[suffix] = sts[1:]
			return sts[0]
		}
	}
	return 0
}

func (s *Server) hubError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	s.mu.Lock()
	echo := s.echo
	s.mu.Unlock()
	if echo {
		msg += " (Authorization: " + r.Header.Get("Authorization") + ")"
	}
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// splitRepo finds the repository id in a path's segments before the given
// keyword ("resolve", or "revision" under /api/models): owner/name or a bare
// name.
func splitRepo(segs []string, keyword string) (id string, rest []string, ok bool) {
	for n := 1; n <= 2 && n < len(segs); n++ {
		if segs[n] == keyword {
			return strings.Join(segs[:n], "/"), segs[n+1:], true
		}
	}
	return "", nil, false
}

func (s *Server) serveHub(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	defer s.record(false, r, w)
	if st := s.failing(r.URL.Path); st != 0 {
		s.hubError(w, r, st, "", "injected failure")
		return
	}
	var segs []string
	for _, seg := range strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/") {
		u, err := url.PathUnescape(seg)
		if err != nil {
			s.hubError(w, r, http.StatusBadRequest, "", "bad path")
			return
		}
		segs = append(segs, u)
	}
	api := len(segs) > 2 && segs[0] == "api" && segs[1] == "models"
	keyword := "resolve"
	if api {
		segs, keyword = segs[2:], "revision"
	}
	id, rest, ok := splitRepo(segs, keyword)
	if !ok || len(rest) == 0 || (!api && len(rest) < 2) {
		s.hubError(w, r, http.StatusNotFound, "", "no such route")
		return
	}
	s.mu.Lock()
	newID, moved := s.renamed[id]
	repo := s.repos[id]
	s.mu.Unlock()
	if moved {
		// A relative redirect without the query, as the Hub answers for a
		// renamed repository.
		loc := strings.Replace(r.URL.EscapedPath(), "/"+id+"/", "/"+newID+"/", 1)
		w.Header().Set("Location", loc)
		w.WriteHeader(http.StatusTemporaryRedirect)
		return
	}
	if repo == nil {
		s.hubError(w, r, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return
	}
	// A gated repository's metadata is public; its files are not.
	if repo.Token != "" && r.Header.Get("Authorization") != "Bearer "+repo.Token && !(repo.Gated && api) {
		switch {
		case repo.Gated && r.Header.Get("Authorization") == "":
			s.hubError(w, r, http.StatusUnauthorized, "GatedRepo", "Access to model "+id+" is restricted. You must be authenticated to access it.")
		case repo.Gated:
			s.hubError(w, r, http.StatusForbidden, "GatedRepo", "Access to model "+id+" is restricted and you are not in the authorized list.")
		default:
			s.hubError(w, r, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		}
		return
	}
	rev := rest[0]
	if api {
		rev = strings.Join(rest, "/")
	}
	if !repo.resolves(rev) {
		s.hubError(w, r, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return
	}
	if api {
		s.serveInfo(w, repo, r.URL.Query().Get("blobs") == "true")
		return
	}
	s.serveResolve(w, r, repo, strings.Join(rest[1:], "/"))
}

// serveInfo answers the revision API.
func (s *Server) serveInfo(w http.ResponseWriter, repo *Repo, blobs bool) {
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		RFilename string `json:"rfilename"`
		Size      *int   `json:"size,omitempty"`
		BlobID    string `json:"blobId,omitempty"`
		LFS       *lfs   `json:"lfs,omitempty"`
	}
	names := make([]string, 0, len(repo.Files))
	for n := range repo.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	var sibs []sibling
	for _, n := range names {
		data := repo.Files[n]
		sb := sibling{RFilename: n}
		if blobs {
			size := len(data)
			sb.Size = &size
			if repo.isLFS(n) {
				sb.BlobID = GitOID(pointer(s.claimedSHA(n, data, false), len(data)))
				sb.LFS = &lfs{SHA256: s.claimedSHA(n, data, false), Size: len(data), PointerSize: 134}
			} else {
				sb.BlobID = GitOID(data)
			}
		}
		sibs = append(sibs, sb)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": repo.ID, "modelId": repo.ID, "sha": repo.Commit,
		"private": repo.Token != "", "siblings": sibs})
}

// claimedSHA is the sha256 the Hub claims for a file: in the file list, or
// in X-Linked-Etag (header).
func (s *Server) claimedSHA(name string, data []byte, header bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hdrSHA[name]; ok && header {
		return h
	}
	if h, ok := s.badSHA[name]; ok {
		return h
	}
	return SHA256(data)
}

// pointer is the git-lfs pointer file of a blob.
func pointer(sha string, size int) []byte {
	return []byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + sha + "\nsize " + strconv.Itoa(size) + "\n")
}

// serveResolve answers GET /{repo}/resolve/{rev}/{file}: a regular file
// from the Hub itself, an LFS file by a redirect to the storage host.
func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, repo *Repo, name string) {
	data, ok := repo.Files[name]
	if !ok {
		s.hubError(w, r, http.StatusNotFound, "EntryNotFound", name+" does not exist on \""+repo.Commit+"\"")
		return
	}
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if !repo.isLFS(name) {
		w.Header().Set("ETag", `"`+GitOID(data)+`"`)
		s.serveBytes(w, r, name, data)
		return
	}
	sha := SHA256(data)
	w.Header().Set("ETag", `"`+GitOID(pointer(sha, len(data)))+`"`)
	w.Header().Set("X-Linked-Etag", `"`+s.claimedSHA(name, data, true)+`"`)
	w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
	w.Header().Set("Location", s.Storage.URL+"/lfs/"+sha+"?file="+url.QueryEscape(name)+"&X-Amz-Signature=feedface")
	w.WriteHeader(http.StatusFound)
}

// serveStorage answers the redirected LFS downloads.
func (s *Server) serveStorage(rw http.ResponseWriter, r *http.Request) {
	w := &statusWriter{ResponseWriter: rw}
	defer s.record(true, r, w)
	sha, ok := strings.CutPrefix(r.URL.Path, "/lfs/")
	name := r.URL.Query().Get("file")
	var data []byte
	found := false
	s.mu.Lock()
	for _, repo := range s.repos {
		if d, ok := repo.Files[name]; ok && SHA256(d) == sha {
			data, found = d, true
		}
	}
	s.mu.Unlock()
	if !ok || !found || r.URL.Query().Get("X-Amz-Signature") == "" {
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return
	}
	if st := s.failing(name); st != 0 {
		http.Error(w, "injected failure", st)
		return
	}
	// The storage host's own ETag is not the content's sha256.
	w.Header().Set("ETag", `"`+hex.EncodeToString([]byte(sha[:8]))+`-1"`)
	s.serveBytes(w, r, name, data)
}

// serveBytes sends data, honouring "Range: bytes=N-" (206, or 416 past the
// end) unless the file ignores ranges, and breaking off where a cut says.
func (s *Server) serveBytes(w http.ResponseWriter, r *http.Request, name string, data []byte) {
	s.mu.Lock()
	ignore := s.noRange[name]
	cut := int64(-1)
	if c := s.cuts[name]; len(c) > 0 {
		cut, s.cuts[name] = c[0], c[1:]
	}
	s.mu.Unlock()
	body := data
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" && !ignore {
		v, ok := strings.CutPrefix(rg, "bytes=")
		a, b, _ := strings.Cut(v, "-")
		start, err := strconv.Atoi(a)
		if !ok || err != nil || b != "" || start < 0 {
			http.Error(w, "unsupported range "+rg, http.StatusBadRequest)
			return
		}
		if start >= len(data) {
			w.Header().Set("Content-Range", "bytes */"+strconv.Itoa(len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body, status = data[start:], http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, len(data)))
	}
	w.Header().Set("Accept-Ranges", "bytes")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if cut >= 0 && cut < int64(len(body)) {
		w.Write(body[:cut])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-body
	}
	bytes.NewReader(body).WriteTo(w)
}
