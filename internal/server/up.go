package server

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/ignore"
)

// UpOptions is a job a client sends a server to run as its up.
type UpOptions struct {
	// Path is the task file; its workdir and items file go with it, less
	// what Excludes leave out.
	Path     string
	Excludes []ignore.Rule
	// JSON asks for the cost report as JSON, written to Report (through
	// --jq); Out and ErrOut take the rest of the up's output.
	JSON                bool
	Report, Out, ErrOut io.Writer
	// Detach returns once the job is queued, its name on Out.
	Detach bool
}

// Up sends the task file, its workdir and items file to the server, which
// runs the job, and follows its output to the end (with Detach, returns
// once it is queued): the up's exit code.
func (c *Client) Up(ctx context.Context, o UpOptions) (int, error) {
	var bundle bytes.Buffer
	name, nfiles, err := PackTask(&bundle, o.Path, o.Excludes)
	if err != nil {
		return 1, err
	}
	id, err := c.Submit(ctx, name, &bundle, o.JSON)
	if err != nil {
		return 1, err
	}
	fmt.Fprintf(o.ErrOut, "job %s submitted to %s (%d files); `vastfleet status %s`, `vastfleet down %s`\n", id, c.URL, nfiles, id, id)
	if o.Detach {
		if o.JSON {
			return 0, cmdutil.WriteJSON(o.Report, map[string]string{"job": id, "server": c.URL})
		}
		fmt.Fprintln(o.Out, id)
		return 0, nil
	}
	code, err := c.Follow(ctx, id, o.Report, o.ErrOut, func(note string) { fmt.Fprintf(o.ErrOut, "note: %s\n", note) })
	if ctx.Err() != nil {
		fmt.Fprintf(o.ErrOut, "\nstopped following; job %s runs on on the server (`vastfleet down %s` ends it)\n", id, id)
		return 1, ctx.Err()
	}
	return code, err
}
