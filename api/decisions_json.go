package api

import (
	"encoding/json"
	"io"
)

// WriteDecisionsJSON writes the answers to a decision document as
// "startlux decide" prints them. For one request (batch false) it writes
// its response, or returns its error without writing; for a batch, one
// JSON array with an {"error": message} object in place of each failed
// request (a daemon's refusal as its message, without its code). resps and
// errs are parallel, as Client.DecideBatch and daemon.DecideDocument
// return them.
func WriteDecisionsJSON(w io.Writer, batch bool, resps []*Response, errs []error) error {
	if !batch {
		if errs[0] != nil {
			return errs[0]
		}
		return json.NewEncoder(w).Encode(resps[0])
	}
	out := make([]any, len(resps))
	for i, r := range resps {
		out[i] = r
		if errs[i] != nil {
			out[i] = map[string]string{"error": ErrorMessage(errs[i])}
		}
	}
	return json.NewEncoder(w).Encode(out)
}
