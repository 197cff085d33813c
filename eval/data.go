// Package eval measures how well a decision model's probabilities match
// labelled data: it reads labelled requests (one JSON object a line), runs
// them through anything that answers decision requests (an in-process
// engine, or the daemon through [Daemon]), and computes per question type
// and overall the accuracy, negative log-likelihood, Brier score, expected
// calibration error and position bias ([Report.WriteText] prints them).
package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/startlux/startlux/decide"
)

// maxLine bounds one line of a labelled data file.
const maxLine = 16 << 20

// Example is one labelled request: a line of a labelled data file,
//
//	{"request": {...}, "labels": {"<question>": <option id>, ...}}
//
// where a noul label is "yes", "no" or "unknown", a choice label a key of the
// criteria and a score label the level's index. Questions without a label
// are asked but not scored.
type Example struct {
	// Line is the example's 1-based line in its file.
	Line int
	// Request is the parsed request, key order kept.
	Request *decide.Request
	// Labels gives, per question (in the request's order), the index of
	// the right option, or -1 for a question without a label.
	Labels []int
}

// ReadFile reads a labelled data file (see [Read]).
func ReadFile(path string) ([]Example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	exs, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return exs, nil
}

// Read reads labelled examples, one JSON object a line; blank lines are
// skipped. Any problem (bad JSON, a bad request, a label that names no
// question or no option) fails the whole read, naming the line.
func Read(r io.Reader) ([]Example, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	var exs []Example
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		ex, err := parseExample(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ex.Line = line
		exs = append(exs, ex)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(exs) == 0 {
		return nil, errors.New("no examples")
	}
	return exs, nil
}

func parseExample(b []byte) (Example, error) {
	fields, err := objectMembers(b)
	if err != nil {
		return Example{}, err
	}
	var reqRaw, labRaw json.RawMessage
	for _, f := range fields {
		switch f.key {
		case "request":
			reqRaw = f.raw
		case "labels":
			labRaw = f.raw
		default:
			return Example{}, fmt.Errorf("unknown field %q (a line has request and labels)", f.key)
		}
	}
	if reqRaw == nil {
		return Example{}, errors.New("request is missing")
	}
	if labRaw == nil {
		return Example{}, errors.New("labels is missing")
	}
	req, err := decide.ParseJSON(reqRaw)
	if err != nil {
		return Example{}, fmt.Errorf("request: %w", err)
	}
	labels, err := objectMembers(labRaw)
	if err != nil {
		return Example{}, fmt.Errorf("labels: %w", err)
	}
	if len(labels) == 0 {
		return Example{}, errors.New("labels: empty (label at least one question)")
	}
	ex := Example{Request: req, Labels: make([]int, len(req.Questions))}
	for i := range ex.Labels {
		ex.Labels[i] = -1
	}
	for _, l := range labels {
		qi := -1
		for i := range req.Questions {
			if req.Questions[i].Name == l.key {
				qi = i
			}
		}
		if qi < 0 {
			return Example{}, fmt.Errorf("labels.%s: the request has no such question", l.key)
		}
		idx, err := labelIndex(&req.Questions[qi], l.raw)
		if err != nil {
			return Example{}, fmt.Errorf("labels.%s: %w", l.key, err)
		}
		ex.Labels[qi] = idx
	}
	return ex, nil
}

// labelIndex returns the index of the option a label names.
func labelIndex(q *decide.Question, raw json.RawMessage) (int, error) {
	opts, err := q.Options()
	if err != nil {
		return 0, err
	}
	if q.Type == decide.Score {
		var num json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&num); err != nil {
			return 0, fmt.Errorf("a score label is the level's index, got %s", raw)
		}
		i, err := strconv.Atoi(num.String())
		if err != nil || i < 0 || i >= len(opts) {
			return 0, fmt.Errorf("a score label is a level index 0..%d, got %s", len(opts)-1, raw)
		}
		return i, nil
	}
	var id string
	if err := json.Unmarshal(raw, &id); err != nil {
		return 0, fmt.Errorf("a %s label is an option id (a string), got %s", q.Type, raw)
	}
	for i, o := range opts {
		if o.ID == id {
			return i, nil
		}
	}
	var ids []string
	for _, o := range opts {
		ids = append(ids, fmt.Sprint(o.ID))
	}
	return 0, fmt.Errorf("%q is not an option of the question (options %v)", id, ids)
}

// member is one key of a JSON object with its raw value.
type member struct {
	key string
	raw json.RawMessage
}

// objectMembers splits a JSON object into its members in order, refusing
// duplicate keys and anything that is not one object.
func objectMembers(b []byte) ([]member, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return nil, errors.New("not a JSON object")
	}
	var ms []member
	seen := map[string]bool{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		k := t.(string)
		if seen[k] {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		seen[k] = true
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, fmt.Errorf("invalid JSON at %q: %w", k, err)
		}
		ms = append(ms, member{k, raw})
	}
	if _, err := d.Token(); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the object")
	}
	return ms, nil
}
