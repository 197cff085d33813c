package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Errors a pull can end in, for errors.Is; the error itself says what and
// where.
var (
	// ErrUnauthorized: the Hub refused the request (401/403): a private or
	// gated repository, no token or a token that cannot read it.
	ErrUnauthorized = errors.New("hub: access refused")
	// ErrNotFound: no such repository, revision or file.
	ErrNotFound = errors.New("hub: not found")
	// ErrUnsupported: the repository holds nothing this engine runs.
	ErrUnsupported = errors.New("hub: checkpoint not supported")
	// ErrNoSpace: the models folder's disk has too little free space.
	ErrNoSpace = errors.New("hub: not enough disk space")
	// ErrIntegrity: a file's size or hash is not what the Hub says.
	ErrIntegrity = errors.New("hub: file does not match the Hub's hash or size")
	// ErrExists: the target directory exists already.
	ErrExists = errors.New("hub: target exists")
)

// Options configure a [Client].
type Options struct {
	// Endpoint is the Hub's base URL ([DefaultEndpoint] when "").
	Endpoint string
	// Token, when set, is sent as "Authorization: Bearer" to the endpoint's
	// origin only. It is never printed: errors have it replaced.
	Token string
	// HTTP is the client requests go through (a client with connect and
	// response-header timeouts when nil). Its redirect policy is replaced:
	// the Client follows redirects itself.
	HTTP *http.Client
	// Retries is how many times a transfer is retried after a network
	// error or a 408/429/5xx answer without any byte arriving in between
	// (5 when 0; negative: never).
	Retries int
	// RetryWait is the pause before a retry (1s when 0).
	RetryWait time.Duration
	// StallTimeout aborts a transfer that receives nothing for this long
	// (60s when 0).
	StallTimeout time.Duration
	// UserAgent is sent with every request ("startlux" when "").
	UserAgent string
}

// EnvOptions returns the Options that HF_ENDPOINT and HF_TOKEN ask for, as
// getenv reports them (os.Getenv in the command).
func EnvOptions(getenv func(string) string) Options {
	return Options{
		Endpoint: strings.TrimSpace(getenv("HF_ENDPOINT")),
		Token:    strings.TrimSpace(getenv("HF_TOKEN")),
	}
}

// Client downloads from one Hub endpoint. Its methods may be called from
// several goroutines.
type Client struct {
	endpoint  *url.URL // scheme://host[:port][/prefix], no trailing slash, no user info
	token     string
	http      *http.Client
	retries   int
	retryWait time.Duration
	stall     time.Duration
	userAgent string
}

// NewClient makes a Client.
func NewClient(o Options) (*Client, error) {
	ep := o.Endpoint
	if ep == "" {
		ep = DefaultEndpoint
	}
	u, err := url.Parse(strings.TrimRight(ep, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("hub endpoint %q: want an http or https URL such as %s", ep, DefaultEndpoint)
	}
	if u.User != nil {
		return nil, fmt.Errorf("hub endpoint %s: user info in the URL is not supported (use HF_TOKEN)", u.Redacted())
	}
	hc := http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}}
	if o.HTTP != nil {
		hc = *o.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{endpoint: u, token: o.Token, http: &hc, retries: o.Retries, retryWait: o.RetryWait,
		stall: o.StallTimeout, userAgent: o.UserAgent}
	switch {
	case c.retries == 0:
		c.retries = 5
	case c.retries < 0:
		c.retries = 0
	}
	if c.retryWait == 0 {
		c.retryWait = time.Second
	}
	if c.stall == 0 {
		c.stall = 60 * time.Second
	}
	if c.userAgent == "" {
		c.userAgent = "startlux"
	}
	return c, nil
}

// Endpoint returns the Hub's base URL.
func (c *Client) Endpoint() string { return c.endpoint.String() }

// redact returns err with every occurrence of the token replaced.
func (c *Client) redact(err error) error {
	if err == nil || c.token == "" || !strings.Contains(err.Error(), c.token) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), c.token, "[HF_TOKEN]"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// repoURL returns {endpoint}/{repo}/{parts...}, each part path-escaped
// (a file's path keeps its slashes).
func (c *Client) repoURL(repo string, parts ...string) *url.URL {
	u := *c.endpoint
	raw := strings.TrimRight(u.EscapedPath(), "/") + "/" + repo
	for _, p := range parts {
		raw += "/" + p
	}
	u.RawPath = raw
	u.Path, _ = url.PathUnescape(raw)
	return &u
}

// escapeFile path-escapes each element of a slash-separated file name.
func escapeFile(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.Join(segs, "/")
}

// sameOrigin reports whether u is served by the endpoint's origin (or its
// https upgrade): the only place the token goes.
func (c *Client) sameOrigin(u *url.URL) bool {
	if !strings.EqualFold(u.Host, c.endpoint.Host) {
		return false
	}
	return u.Scheme == c.endpoint.Scheme || (c.endpoint.Scheme == "http" && u.Scheme == "https")
}

// meta is what the Hub's own responses say about a file.
type meta struct {
	commit     string // X-Repo-Commit
	linkedEtag string // X-Linked-Etag, normalised: the sha256 of an LFS file
	etag       string // ETag, normalised: the git blob id of a regular file
	linkedSize int64  // X-Linked-Size, -1 when absent
	seen       bool   // some endpoint response was read
}

// readMeta records the metadata headers of an endpoint response.
func (m *meta) read(h http.Header, redirect bool) {
	m.seen = true
	if v := h.Get("X-Repo-Commit"); v != "" {
		m.commit = v
	}
	if v := normEtag(h.Get("X-Linked-Etag")); v != "" {
		m.linkedEtag = v
	}
	// A redirect's own ETag describes the pointer, not the content, when
	// X-Linked-Etag is there; keep it only for regular files.
	if v := normEtag(h.Get("ETag")); v != "" && (!redirect || m.linkedEtag == "") {
		m.etag = v
	}
	if v, err := strconv.ParseInt(h.Get("X-Linked-Size"), 10, 64); err == nil && v >= 0 {
		m.linkedSize = v
	}
}

// normEtag strips the weak marker and quotes of an ETag.
func normEtag(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "W/")
	return strings.Trim(s, `"`)
}

// maxRedirects bounds a redirect chain.
const maxRedirects = 10

// get sends GET u with hdr and follows redirects: relative and same-origin
// ones keep the token, others drop it, https→http is refused. It returns the
// final response (any status) and the metadata of the endpoint's responses.
// check, if set, vets that metadata before the request leaves the
// endpoint's origin (or before the final response is returned, when it
// never does): an error from it ends the request.
func (c *Client) get(ctx context.Context, u *url.URL, hdr http.Header, check func(meta) error) (*http.Response, meta, error) {
	m := meta{linkedSize: -1}
	checked := check == nil
	for range maxRedirects + 1 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return nil, m, fmt.Errorf("GET %s: %w", displayURL(u), err)
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		req.Header.Set("User-Agent", c.userAgent)
		// The real size and byte ranges of the file, never a compressed body.
		req.Header.Set("Accept-Encoding", "identity")
		own := c.sameOrigin(u)
		if own && c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, m, fmt.Errorf("GET %s: %w", displayURL(u), stripURLError(err))
		}
		isRedirect := resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != ""
		if own {
			m.read(resp.Header, isRedirect)
		}
		if !isRedirect {
			if !checked && resp.StatusCode < 300 {
				if err := check(m); err != nil {
					resp.Body.Close()
					return nil, m, err
				}
			}
			return resp, m, nil
		}
		loc, err := url.Parse(resp.Header.Get("Location"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			return nil, m, fmt.Errorf("GET %s: bad redirect location: %w", displayURL(u), err)
		}
		next := u.ResolveReference(loc)
		if loc.Host == "" && loc.RawQuery == "" {
			// A relative redirect (a renamed repository) moves the path;
			// the query stays, as huggingface_hub keeps it.
			next.RawQuery = u.RawQuery
		}
		if u.Scheme == "https" && next.Scheme != "https" {
			return nil, m, fmt.Errorf("GET %s: redirect to %s refused (https to %s)", displayURL(u), displayURL(next), next.Scheme)
		}
		if !checked && !c.sameOrigin(next) {
			if err := check(m); err != nil {
				return nil, m, err
			}
			checked = true
		}
		u = next
	}
	return nil, m, fmt.Errorf("GET %s: more than %d redirects", displayURL(u), maxRedirects)
}

// displayURL writes u without its query (signed storage URLs carry long
// signatures) and without user info.
func displayURL(u *url.URL) string {
	v := *u
	v.RawQuery, v.Fragment, v.User = "", "", nil
	return v.String()
}

// stripURLError removes the *url.Error layer, whose message repeats the full
// URL with its query.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// An HTTPError is a request the Hub (or its storage) answered with an
// error status.
type HTTPError struct {
	// Status is the HTTP status code.
	Status int
	// Code and Message are the Hub's X-Error-Code and X-Error-Message (or
	// the "error" of a JSON body), when it sent them.
	Code, Message string
	// URL is the request's address without its query.
	URL string
}

// Error says the request, the status and the Hub's message.
func (e *HTTPError) Error() string {
	s := fmt.Sprintf("GET %s: %d %s", e.URL, e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is makes errors.Is match [ErrUnauthorized] for 401/403 and
// [ErrNotFound] for 404.
func (e *HTTPError) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	}
	return false
}

// retryable reports whether the status is worth another try.
func retryable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// httpError reads an error response into an HTTPError and closes it.
func httpError(resp *http.Response) *HTTPError {
	defer resp.Body.Close()
	e := &HTTPError{Status: resp.StatusCode, Code: resp.Header.Get("X-Error-Code"),
		Message: resp.Header.Get("X-Error-Message"), URL: displayURL(resp.Request.URL)}
	if e.Message == "" {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		var j struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &j) == nil && j.Error != "" {
			e.Message = j.Error
		}
	}
	return e
}

// explain turns an HTTPError about a request for ref into the error a
// person reads: what was refused and what to do.
func (c *Client) explain(ref Ref, e *HTTPError) error {
	repo := ref.String()
	page := c.repoURL(ref.Repo).String()
	switch {
	case e.Code == "GatedRepo" && c.token == "":
		return fmt.Errorf("%s is gated: accept its conditions at %s, then set HF_TOKEN to a token of that account: %w", ref.Repo, page, e)
	case e.Code == "GatedRepo":
		return fmt.Errorf("%s is gated and HF_TOKEN's account has not been granted access: accept its conditions at %s: %w", ref.Repo, page, e)
	case e.Status == http.StatusUnauthorized && c.token == "":
		return fmt.Errorf("%s: the Hub refused access without a token: the repository is private or gated, or does not exist; set HF_TOKEN to a token that can read it: %w", repo, e)
	case e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden:
		return fmt.Errorf("%s: the Hub refused HF_TOKEN: it is invalid, or cannot read this repository (or the repository does not exist): %w", repo, e)
	case e.Code == "RevisionNotFound":
		return fmt.Errorf("%s: no such revision %q (want a branch, tag or commit of %s): %w", repo, ref.Revision, ref.Repo, e)
	case e.Code == "EntryNotFound":
		return fmt.Errorf("%s: file not found: %w", repo, e)
	case e.Status == http.StatusNotFound:
		return fmt.Errorf("%s: not found on %s: %w", repo, c.Endpoint(), e)
	}
	return fmt.Errorf("%s: %w", repo, e)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
