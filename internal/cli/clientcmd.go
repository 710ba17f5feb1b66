package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/remote"
	"github.com/vastfleet/vastfleet/internal/server"
)

// exitCode is a command whose outcome is only its exit code: a command a
// server ran has printed its own error already.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// contextsPath is the client's contexts file: $VASTFLEET_CONFIG/contexts.json,
// else the user's config dir's vastfleet/contexts.json.
func (f *factory) contextsPath() (string, error) {
	dir := f.io.Getenv("VASTFLEET_CONFIG")
	if dir == "" {
		d, err := os.UserConfigDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(d, "vastfleet")
	}
	return filepath.Join(dir, "contexts.json"), nil
}

// serverClient is the server this command talks to, if any: --server URL
// (with VASTFLEET_TOKEN, or the token of a context for that URL), else the
// current context (VASTFLEET_TOKEN overriding its token). --server local,
// or no context, runs everything in this process.
func (f *factory) serverClient() (*server.Client, error) {
	if f.opts.Server == server.Local {
		return nil, nil
	}
	path, err := f.contextsPath()
	if err != nil {
		return nil, err
	}
	cs, err := server.LoadContexts(path)
	if err != nil {
		return nil, err
	}
	var c *server.Context
	if f.opts.Server != "" {
		c = &server.Context{URL: f.opts.Server}
		for _, n := range cs.Names() {
			if strings.TrimRight(cs.Contexts[n].URL, "/") == strings.TrimRight(f.opts.Server, "/") {
				c = cs.Contexts[n]
				break
			}
		}
	} else if c = cs.Active(); c == nil {
		return nil, nil
	}
	cl := &server.Client{URL: c.URL, Token: c.Token, Pin: c.Pin, Version: Version}
	if tok := f.io.Getenv("VASTFLEET_TOKEN"); tok != "" {
		cl.Token = tok
	}
	return cl, nil
}

// remotable makes cmd run on the server when there is one: up submits
// and follows, the others are run there as typed.
func remotable(f *factory, cmd *cobra.Command) *cobra.Command {
	local := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		cl, err := f.serverClient()
		if err != nil {
			return err
		}
		if cl == nil {
			return local(c, args)
		}
		if c.Name() == "up" {
			return remoteUp(c, f, cl, args)
		}
		argv := append([]string{c.Name()}, flagArgs(c)...)
		code, err := cl.Run(c.Context(), append(argv, args...), f.io.Out, f.io.ErrOut)
		if err != nil {
			return err
		}
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	return cmd
}

// flagArgs are the command's own flags the user set, each as
// --name=value (global flags stay here: the server has its own).
func flagArgs(c *cobra.Command) []string {
	var out []string
	inherited := c.InheritedFlags()
	c.Flags().Visit(func(fl *pflag.Flag) {
		if inherited.Lookup(fl.Name) != nil {
			return
		}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			for _, v := range sv.GetSlice() {
				out = append(out, "--"+fl.Name+"="+v)
			}
			return
		}
		out = append(out, "--"+fl.Name+"="+fl.Value.String())
	})
	return out
}

// remoteUp sends the task file, its workdir and items file to the server
// which runs the job, and follows its output to the end (or, with
// --detach, returns once it is queued).
func remoteUp(c *cobra.Command, f *factory, cl *server.Client, args []string) error {
	for _, name := range []string{"resume", "coord-addr", "agent-bin", "results", "on-interrupt", "job-id"} {
		if c.Flags().Changed(name) {
			return usagef("up --%s is for a local up; against a server, up FILE [--json] [--detach] (the server keeps the results: `vastfleet down JOB` there)", name)
		}
	}
	path := jobfile.DefaultName
	if len(args) == 1 {
		path = args[0]
	}
	name, spec, err := server.TaskBundle(path, func(dir string) ([]string, error) {
		files, err := remote.ScanTree(dir, syncExcludes(), nil)
		rels := make([]string, len(files))
		for i, tf := range files {
			rels[i] = tf.Rel
		}
		return rels, err
	})
	if err != nil {
		return usageError{err}
	}
	var bundle bytes.Buffer
	if err := server.Pack(&bundle, spec); err != nil {
		return err
	}
	asJSON := c.Flags().Changed("json") || c.Flags().Changed("jq")
	ctx := c.Context()
	id, err := cl.Submit(ctx, name, &bundle, asJSON)
	if err != nil {
		return err
	}
	fmt.Fprintf(f.io.ErrOut, "job %s submitted to %s (%d files); `vastfleet status %s`, `vastfleet down %s`\n", id, cl.URL, len(spec.Files), id, id)
	if detach, _ := c.Flags().GetBool("detach"); detach {
		if asJSON {
			jq, _ := c.Flags().GetString("jq")
			return writeJSON(JSONFlags{JSON: true, JQ: jq}.out(f.io.Out), map[string]string{"job": id, "server": cl.URL})
		}
		fmt.Fprintln(f.io.Out, id)
		return nil
	}
	// With --jq the report the server's up prints goes through the
	// expression here, as a local up's would.
	jq, _ := c.Flags().GetString("jq")
	out := JSONFlags{JSON: asJSON, JQ: jq}.out(f.io.Out)
	code, err := cl.Follow(ctx, id, out, f.io.ErrOut, func(note string) { fmt.Fprintf(f.io.ErrOut, "note: %s\n", note) })
	if ctx.Err() != nil {
		fmt.Fprintf(f.io.ErrOut, "\nstopped following; job %s runs on on the server (`vastfleet down %s` ends it)\n", id, id)
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	if code != 0 {
		return exitCode(code)
	}
	return nil
}

type contextOptions struct {
	TokenFile string
	Pin       string
	JSONFlags
}

func newContextCmd(f *factory) *cobra.Command {
	opts := &contextOptions{}
	cmd := &cobra.Command{
		Use:   "context",
		Short: "Servers this command line talks to (add, use, ls), as docker and kubectl contexts",
	}
	add := &cobra.Command{
		Use:   "add NAME URL [--token-file F] [--pin SHA256]",
		Short: "Add a server (its token read from a file, kept in the 0600 contexts file)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := server.Context{Name: args[0], URL: args[1]}
			if opts.TokenFile != "" {
				b, err := os.ReadFile(opts.TokenFile)
				if err != nil {
					return usageError{err}
				}
				c.Token = strings.TrimSpace(string(b))
			}
			if opts.Pin != "" {
				pin, err := certpin.Parse(opts.Pin)
				if err != nil {
					return usagef("--pin: %v", err)
				}
				c.Pin = pin
			}
			return editContexts(f, func(cs *server.Contexts) error {
				if err := cs.Add(c); err != nil {
					return usageError{err}
				}
				if cs.Current == "" {
					cs.Current = c.Name
				}
				fmt.Fprintf(f.io.ErrOut, "context %s: %s (current: %s)\n", c.Name, c.URL, cs.Current)
				return nil
			})
		},
	}
	add.Flags().StringVar(&opts.TokenFile, "token-file", "", "file holding the API token (else VASTFLEET_TOKEN at each command)")
	add.Flags().StringVar(&opts.Pin, "pin", "", "the server certificate's sha256 (serve --tls prints it)")
	use := &cobra.Command{
		Use:   "use NAME|local",
		Short: "Talk to NAME from now on (local: run everything in this process)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return editContexts(f, func(cs *server.Contexts) error {
				if err := cs.Use(args[0]); err != nil {
					return usageError{err}
				}
				fmt.Fprintf(f.io.ErrOut, "current context: %s\n", args[0])
				return nil
			})
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the contexts, the current one marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := f.contextsPath()
			if err != nil {
				return err
			}
			cs, err := server.LoadContexts(path)
			if err != nil {
				return err
			}
			type row struct {
				Name     string `json:"name"`
				URL      string `json:"url"`
				Current  bool   `json:"current"`
				HasToken bool   `json:"has_token"`
			}
			rows := []row{{Name: server.Local, Current: cs.Current == ""}}
			for _, n := range cs.Names() {
				c := cs.Contexts[n]
				rows = append(rows, row{Name: n, URL: c.URL, Current: cs.Current == n, HasToken: c.Token != ""})
			}
			if opts.JSON {
				return writeJSON(opts.out(f.io.Out), rows)
			}
			t := newTable(f.io.Out, "CURRENT", "NAME", "URL", "TOKEN")
			for _, r := range rows {
				cur, tok := "", ""
				if r.Current {
					cur = "*"
				}
				if r.HasToken {
					tok = "yes"
				}
				t.row(cur, r.Name, r.URL, tok)
			}
			return t.flush()
		},
	}
	addJSONFlags(ls.Flags(), &opts.JSONFlags, "print JSON")
	cmd.AddCommand(add, use, ls)
	return cmd
}

func editContexts(f *factory, edit func(*server.Contexts) error) error {
	path, err := f.contextsPath()
	if err != nil {
		return err
	}
	cs, err := server.LoadContexts(path)
	if err != nil {
		return err
	}
	if err := edit(cs); err != nil {
		return err
	}
	return cs.Save(path)
}
