// Package cmdutil holds what reporting commands share, as gh's
// pkg/cmdutil does: --json and --jq declared once, the JSON writer, the
// table a person reads or a pipe cuts and the cells' number formats. It
// links no command tree, so a domain package writes its own report with
// it (a Write function) for every command that prints that report.
package cmdutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/usage"
)

// JSONFlags is a reporting command's --json and --jq, declared once by
// AddJSONFlags so that every command takes both the same way, as gh does.
type JSONFlags struct {
	JSON bool   // print JSON instead of the table
	JQ   string // a jq expression over that JSON; implies JSON
}

// AddJSONFlags declares --json (usage says what it prints) and --jq.
func AddJSONFlags(fl *pflag.FlagSet, j *JSONFlags, usage string) {
	fl.BoolVar(&j.JSON, "json", false, usage)
	fl.StringVar(&j.JQ, "jq", "", "print what the jq `expression` makes of the JSON: strings raw, other values as JSON, one per line (implies --json)")
}

// CheckJQ runs before every command (root's PersistentPreRunE): a bad
// --jq expression is a usage error before anything is done or rented,
// and --jq turns --json on.
func CheckJQ(fs *pflag.FlagSet) error {
	fl := fs.Lookup("jq")
	if fl == nil || !fl.Changed {
		return nil
	}
	if _, err := compileJQ(fl.Value.String()); err != nil {
		return usage.Error{Err: err}
	}
	return fs.Set("json", "true")
}

func compileJQ(expr string) (*gojq.Code, error) {
	q, err := gojq.Parse(expr)
	if err == nil {
		var code *gojq.Code
		if code, err = gojq.Compile(q); err == nil {
			return code, nil
		}
	}
	return nil, fmt.Errorf("--jq %q: %v (see https://jqlang.org/manual/)", expr, err)
}

// Out is where the command writes its JSON: w itself, or with --jq a
// writer that runs the expression over each JSON value written to it
// (one document, or one per line as launch --json streams them).
func (j JSONFlags) Out(w io.Writer) io.Writer {
	if j.JQ == "" {
		return w
	}
	code, err := compileJQ(j.JQ)
	return &jqWriter{w: w, code: code, err: err}
}

// Stream is Out(w) with --json, nil without: where a command that
// streams JSON events writes them, if it does.
func (j JSONFlags) Stream(w io.Writer) io.Writer {
	if !j.JSON {
		return nil
	}
	return j.Out(w)
}

type jqWriter struct {
	w    io.Writer
	code *gojq.Code
	err  error // sticky: a failed query stops the output
	buf  []byte
}

// Write takes JSON text in pieces of any size and runs the query on each
// value as soon as the value is whole.
func (q *jqWriter) Write(p []byte) (int, error) {
	if q.err != nil {
		return 0, q.err
	}
	q.buf = append(q.buf, p...)
	for {
		dec := json.NewDecoder(bytes.NewReader(q.buf))
		dec.UseNumber() // ids and cents as written, not as float64
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return len(p), nil // the rest of the value is still to come
		}
		if err != nil {
			q.err = fmt.Errorf("--jq: %w", err)
			return 0, q.err
		}
		q.buf = q.buf[dec.InputOffset():]
		if q.err = q.run(v); q.err != nil {
			return 0, q.err
		}
	}
}

func (q *jqWriter) run(v any) error {
	var out bytes.Buffer
	iter := q.code.Run(v)
	for {
		r, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := r.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) && halt.Value() == nil {
				break
			}
			return fmt.Errorf("--jq: %w", err)
		}
		if s, ok := r.(string); ok {
			out.WriteString(s)
		} else {
			b, err := gojq.Marshal(r)
			if err != nil {
				return fmt.Errorf("--jq: %w", err)
			}
			out.Write(b)
		}
		out.WriteByte('\n')
	}
	_, err := q.w.Write(out.Bytes())
	return err
}
