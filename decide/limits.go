package decide

import "fmt"

// validatedEvidence validates r and renders its evidence: the first step of
// preparing a request of either checkpoint family.
func validatedEvidence(r *Request) (string, error) {
	if r == nil {
		return "", &RequestError{Message: "no request"}
	}
	if err := r.Validate(); err != nil {
		return "", err
	}
	return RenderJSON(&r.Evidence)
}

// rowLimit collects, question by question, which rows exceed the model's
// position limit, and turns that into the request's error: the evidence is
// to blame when every question's row is too long, otherwise the first
// question whose row is.
type rowLimit struct {
	limit     int // the model's limit; ≤ 0 means none
	tooLong   int // questions over the limit
	shortest  int // the shortest of their rows
	firstLong *RequestError
}

// add records question q, whose longest row has n positions.
func (l *rowLimit) add(q *Question, n int) {
	if l.limit <= 0 || n <= l.limit {
		return
	}
	if l.tooLong == 0 || n < l.shortest {
		l.shortest = n
	}
	l.tooLong++
	if l.firstLong == nil {
		field := "instructions"
		if q.Type != Noul {
			field = "criteria"
		}
		l.firstLong = &RequestError{Question: q.Name, Field: field,
			Message: fmt.Sprintf("its rows reach %d tokens (evidence included); the model takes at most %d", n, l.limit)}
	}
}

// err returns the request's error for a request of questions questions, or
// nil when every row fits.
func (l *rowLimit) err(questions int) error {
	switch {
	case l.tooLong > 0 && l.tooLong == questions:
		return &RequestError{Field: "evidence", Message: fmt.Sprintf("too long: every question's row exceeds the model's limit of %d tokens (the shortest has %d)", l.limit, l.shortest)}
	case l.firstLong != nil:
		return l.firstLong
	}
	return nil
}
