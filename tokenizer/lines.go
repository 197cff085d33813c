package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// EncodeLines reads one JSON string per line from in and writes, for each,
// one line holding the JSON array of its token ids to out ("startlux
// tokenize"). A last line without a newline counts; a line that is not a
// JSON string (a blank one included) ends the run with an error naming its
// number. What was encoded before an error is written out.
func (t *Tokenizer) EncodeLines(ctx context.Context, in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	if err := t.encodeLines(ctx, r, w); err != nil {
		w.Flush()
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}

func (t *Tokenizer) encodeLines(ctx context.Context, in *bufio.Reader, out *bufio.Writer) error {
	var buf []byte
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		line, err := in.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("read line %d: %w", n, err)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '"' {
			return fmt.Errorf("line %d: want a JSON string, got %s", n, quoteStart(line))
		}
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		buf = append(buf[:0], '[')
		for i, id := range t.Encode(s) {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(id), 10)
		}
		buf = append(buf, ']', '\n')
		if _, err := out.Write(buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
}

// quoteStart shows the start of a bad input line.
func quoteStart(line []byte) string {
	if len(line) == 0 {
		return "an empty line"
	}
	if len(line) > 40 {
		return strconv.Quote(string(line[:40])) + "..."
	}
	return strconv.Quote(string(line))
}
