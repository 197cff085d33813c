package decide

import (
	"strconv"
	"strings"

	"github.com/startlux/startlux/value"
)

// RequestError is a problem with a request: the daemon answers it as a bad
// request. Question is the question's name when the problem is inside one,
// Field the field at fault ("evidence", "questions", "type", "criteria",
// "instructions", or an unknown field's name).
type RequestError struct {
	// Item is 1 + the request's index when the problem is inside one request
	// of a batch document that could not be read, 0 otherwise.
	Item     int
	Question string
	Field    string
	Message  string
}

// Error renders the error as `question "q": field: message`, leaving out the
// parts that are empty.
func (e *RequestError) Error() string {
	var b strings.Builder
	b.WriteString("bad request: ")
	if e.Item > 0 {
		b.WriteString("request " + strconv.Itoa(e.Item-1) + ": ")
	}
	if e.Question != "" {
		b.WriteString("question ")
		b.WriteString(strconv.Quote(e.Question))
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// pathNode is one step of the path to a value inside a request, used to name
// where a problem is. The root is nil.
type pathNode struct {
	parent *pathNode
	key    string
	index  int // -1 for an object key
}

func joinPath(p *pathNode, key string) *pathNode { return &pathNode{parent: p, key: key, index: -1} }

func indexPath(p *pathNode, i int) *pathNode { return &pathNode{parent: p, index: i} }

// path lists the steps from the root.
func (p *pathNode) path() value.Path {
	var s value.Path
	for ; p != nil; p = p.parent {
		s = append(s, value.Step{Key: p.key, Index: p.index})
	}
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

// pathError makes a *RequestError about the value at path p, as
// [pathStepsError] does.
func pathError(p *pathNode, msg string) *RequestError { return pathStepsError(p.path(), msg) }

// pathStepsError makes a *RequestError about the value at path segs: inside
// questions.<name>.<field> it names the question and field; otherwise the
// first key of the path is the field. msg is completed with the rest of the
// path when the problem is deeper than the field.
func pathStepsError(segs value.Path, msg string) *RequestError {
	e := &RequestError{Message: msg}
	// Inside a batch ([i] or requests[i]) the path is named from the request.
	if len(segs) > 0 && segs[0].Index < 0 && segs[0].Key == "requests" && len(segs) > 1 && segs[1].Index >= 0 {
		segs = segs[1:]
	}
	if len(segs) > 0 && segs[0].Index >= 0 {
		e.Item = segs[0].Index + 1
		segs = segs[1:]
	}
	if len(segs) == 0 {
		return e
	}
	rest := segs[1:]
	e.Field = segs[0].Key
	if segs[0].Key == "questions" && len(segs) >= 2 {
		e.Question = segs[1].Key
		e.Field = ""
		rest = nil
		if len(segs) >= 3 {
			e.Field = segs[2].Key
			rest = segs[3:]
		}
	}
	if len(rest) > 0 {
		e.Message += " at " + segs.String()
	}
	return e
}
