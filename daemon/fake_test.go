package daemon

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/startlux/startlux/api"
	"github.com/startlux/startlux/decide"
)

// fakeEngine answers with probabilities derived from a hash of each
// question's instructions and the model's tag, so answers are a pure
// function of (model, request): what batching must not change. A job costs
// 10 tokens a question, or N for a first question whose instructions are
// "big:N"; a batch runs in passes of fakePass tokens, each asking for a turn
// and taking delay.
type fakeEngine struct {
	tag   int
	delay time.Duration
	gate  chan struct{} // if set, Run waits for it to be closed
	// weights is what the engine says its weights hold (Memory).
	weights int64

	mu       sync.Mutex // guards the fields below
	closed   bool
	handed   bool // given to a daemon
	active   int
	misuse   []string // Run on a closed engine, Close while active
	batches  []int    // sizes of the batches received
	requests int
	// passLog has, per pass, "ask " and the first question names of its
	// batch's jobs when it asks for its turn, then the names when it runs.
	passLog []string
}

// fakePass is the fake engine's pass size in tokens.
const fakePass = 100

// fakeJob is a request the fake engine prepared.
type fakeJob struct {
	req    *decide.Request
	tokens int
}

func (j *fakeJob) Tokens() int { return j.tokens }

func (f *fakeEngine) Prepare(r *decide.Request) (Job, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	j := &fakeJob{req: r, tokens: 10 * len(r.Questions)}
	if n, ok := strings.CutPrefix(r.Questions[0].Instructions, "big:"); ok {
		j.tokens, _ = strconv.Atoi(n)
	}
	return j, nil
}

func (f *fakeEngine) Limits() decide.Limits {
	return decide.Limits{MaxQuestions: 256, MaxEvidenceTokens: 4096, MaxRequestTokens: 262144}
}

func (f *fakeEngine) Run(ctx context.Context, jobs []Job, turn decide.Turn, passTokens int) ([]*decide.Response, []error) {
	f.mu.Lock()
	if f.closed {
		f.misuse = append(f.misuse, "Run after Close")
	}
	f.active++
	f.batches = append(f.batches, len(jobs))
	f.requests += len(jobs)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	if f.gate != nil {
		<-f.gate
	}
	tokens := 0
	var names []string
	for _, j := range jobs {
		tokens += j.Tokens()
		names = append(names, j.(*fakeJob).req.Questions[0].Name)
	}
	label := strings.Join(names, ",")
	resps := make([]*decide.Response, len(jobs))
	errs := make([]error, len(jobs))
	for range (tokens + fakePass - 1) / fakePass {
		done := func() {}
		if turn != nil {
			f.mu.Lock()
			f.passLog = append(f.passLog, "ask "+label)
			f.mu.Unlock()
			var err error
			if done, err = turn(ctx, fakePass); err != nil {
				for i := range errs {
					errs[i] = err
				}
				return resps, errs
			}
		}
		f.mu.Lock()
		f.passLog = append(f.passLog, label)
		f.mu.Unlock()
		if f.delay > 0 {
			time.Sleep(f.delay)
		}
		done()
	}
	for i, j := range jobs {
		resps[i], errs[i] = fakeAnswer(f.tag, j.(*fakeJob).req)
	}
	return resps, errs
}

// fakeAnswer is the fake model: the reference the daemon's answers are
// compared with.
func fakeAnswer(tag int, r *decide.Request) (*decide.Response, error) {
	resp := &decide.Response{Tokens: tag}
	for qi := range r.Questions {
		q := &r.Questions[qi]
		if q.Instructions == "explode" {
			return nil, errors.New("the fake model exploded")
		}
		opts, err := q.Options()
		if err != nil {
			return nil, err
		}
		a := decide.Answer{Name: q.Name}
		sum, best := 0.0, 0
		for i, o := range opts {
			h := fnv.New64a()
			h.Write([]byte{byte(tag), byte(i)})
			h.Write([]byte(q.Instructions))
			p := float64(h.Sum64()%1000+1) / 1000
			a.Options = append(a.Options, o.ID)
			a.Probs = append(a.Probs, p)
			sum += p
		}
		for i := range a.Probs {
			a.Probs[i] /= sum
			if a.Probs[i] > a.Probs[best] {
				best = i
			}
		}
		a.Answer = a.Options[best]
		resp.Answers = append(resp.Answers, a)
	}
	return resp, nil
}

func (f *fakeEngine) CacheStats() (int64, int64) { return 123, 456 }

// Memory implements memoryReporter.
func (f *fakeEngine) Memory() EngineMemory {
	return EngineMemory{Weights: f.weights, Cache: 123, CacheLimit: 456}
}

// isClosed reports whether the engine was closed.
func (f *fakeEngine) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

func (f *fakeEngine) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.active > 0 {
		f.misuse = append(f.misuse, "Close while a batch runs")
	}
	f.closed = true
	return nil
}

func (f *fakeEngine) problems() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.misuse...)
}

// fakeLoader hands out engines by directory; loadGate, if set, holds every
// load until closed; fail makes loads of that directory fail.
type fakeLoader struct {
	mu       sync.Mutex               // guards engines and tags
	engines  map[string][]*fakeEngine // every engine made per directory, latest last
	tags     map[string]int
	delay    time.Duration
	loadGate chan struct{}
	fail     string
	noInt8   string // when set, int8 loads fail and statuses say so, with this reason
	panicOn  string // a directory whose load panics
	// weights gives the engines of a directory their Memory weights;
	// opened, if set, is told of every load as it begins.
	weights map[string]int64
	opened  func(dir string)
}

func newFakeLoader() *fakeLoader {
	return &fakeLoader{engines: map[string][]*fakeEngine{}, tags: map[string]int{}}
}

// engine returns the latest engine made for dir, making one if none was; a
// test may prepare it before the daemon loads it.
func (l *fakeLoader) engine(dir string) *fakeEngine {
	l.mu.Lock()
	defer l.mu.Unlock()
	if es := l.engines[dir]; len(es) > 0 {
		return es[len(es)-1]
	}
	return l.makeLocked(dir)
}

// all returns every engine made for dir.
func (l *fakeLoader) all(dir string) []*fakeEngine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*fakeEngine(nil), l.engines[dir]...)
}

func (l *fakeLoader) makeLocked(dir string) *fakeEngine {
	tag, ok := l.tags[dir]
	if !ok {
		tag = len(l.tags) + 1
		l.tags[dir] = tag
	}
	e := &fakeEngine{tag: tag, delay: l.delay, weights: l.weights[dir]}
	l.engines[dir] = append(l.engines[dir], e)
	return e
}

// open hands out the prepared engine for dir if it was never loaded, a new
// one otherwise (a real loader makes a fresh engine per load).
func (l *fakeLoader) open(dir string) *fakeEngine {
	l.mu.Lock()
	defer l.mu.Unlock()
	if es := l.engines[dir]; len(es) > 0 && !es[len(es)-1].handed {
		es[len(es)-1].handed = true
		return es[len(es)-1]
	}
	e := l.makeLocked(dir)
	e.handed = true
	return e
}

func (l *fakeLoader) load(ctx context.Context, dir string, useInt8 bool, progress func(done, total int64)) (Engine, api.ModelStatus, error) {
	if l.opened != nil {
		l.opened(dir)
	}
	progress(0, 100)
	if l.loadGate != nil {
		select {
		case <-l.loadGate:
		case <-ctx.Done():
			return nil, api.ModelStatus{}, ctx.Err()
		}
	}
	if dir == l.panicOn && dir != "" {
		panic("the fake loader fell over")
	}
	if dir == l.fail && dir != "" {
		return nil, api.ModelStatus{}, errors.New("no such checkpoint")
	}
	if useInt8 && l.noInt8 != "" {
		return nil, api.ModelStatus{}, errors.New("int8: " + l.noInt8)
	}
	progress(100, 100)
	name := dir
	if name == "" {
		name = "demo-decision"
	}
	st := api.ModelStatus{Name: name, Path: dir, Backend: "fake", Int8: useInt8, Int8Unavailable: l.noInt8}
	if useInt8 {
		st.Int8Kernel = "fake-int8"
	}
	return l.open(dir), st, nil
}
