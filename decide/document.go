package decide

import (
	"bytes"
	"context"
	"fmt"

	"github.com/startlux/startlux/value"
)

// Document is a decision document read from JSON, as "startlux decide"
// reads its input: one request, or a batch (a JSON array of requests) in
// which each request that cannot be read keeps its own error.
type Document struct {
	// Batch is set when the document is an array of requests.
	Batch bool
	// Requests holds the requests in order, nil where Errs holds the
	// error of reading it.
	Requests []*Request
	// Errs holds, for each request, the error of reading it (nil: read).
	Errs []error
}

// IsBatchJSON reports whether a JSON document is an array (of requests):
// what a document must be for [ParseDocument] to read it as a batch.
func IsBatchJSON(data []byte) bool {
	return bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("["))
}

// ParseDocument reads a decision document from JSON: a batch ([IsBatchJSON])
// with [ParseJSONBatch], anything else as one request with [ParseJSON]. The
// error is the document's: a batch that cannot be read as a whole, or the
// one request's.
func ParseDocument(data []byte) (*Document, error) {
	if IsBatchJSON(data) {
		reqs, errs, err := ParseJSONBatch(data)
		if err != nil {
			return nil, err
		}
		return &Document{Batch: true, Requests: reqs, Errs: errs}, nil
	}
	r, err := ParseJSON(data)
	if err != nil {
		return nil, err
	}
	return &Document{Requests: []*Request{r}, Errs: []error{nil}}, nil
}

// DecideDocument answers the requests of d that were read, as one
// [Engine.DecideBatch]. The i-th response or error belongs to d's i-th
// request; a request that could not be read gets its error from d.Errs.
func (e *Engine) DecideDocument(ctx context.Context, d *Document) ([]*Response, []error) {
	var todo []*Request
	for i, r := range d.Requests {
		if d.Errs[i] == nil {
			todo = append(todo, r)
		}
	}
	done, doneErrs := e.DecideBatch(ctx, todo)
	resps := make([]*Response, len(d.Requests))
	errs := make([]error, len(d.Requests))
	k := 0
	for i := range d.Requests {
		if errs[i] = d.Errs[i]; errs[i] == nil {
			resps[i], errs[i] = done[k], doneErrs[k]
			k++
		}
	}
	return resps, errs
}

// DocumentMsgpack converts a decision document's JSON to msgpack, key
// order and number forms kept, without reading its requests: what a client
// sends the daemon as decide's params, or decide_batch's for a batch
// ([IsBatchJSON]). JSON that cannot be read is reported as [ParseDocument]
// reports it, naming where; a value msgpack cannot hold (an integer beyond
// 64 bits) is refused naming it.
func DocumentMsgpack(data []byte) ([]byte, error) {
	v, err := value.ParseJSON(data)
	if err != nil {
		if IsBatchJSON(data) {
			_, _, err = ReadBatch(&v, err)
		} else {
			_, err = Read(&v, err)
		}
		return nil, err
	}
	b, err := value.AppendMsgpack(nil, &v)
	if err != nil {
		return nil, fmt.Errorf("the request cannot go to the daemon: %w", err)
	}
	return b, nil
}
