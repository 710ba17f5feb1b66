package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
	"github.com/vastfleet/vastfleet/internal/jobfile"
	"github.com/vastfleet/vastfleet/internal/server"
)

// exitCode is a command whose outcome is only its exit code: a command a
// server ran has printed its own error already.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// remotable makes cmd run on the server when there is one: up submits
// and follows, the others are run there as typed.
func remotable(f *factory.Factory, cmd *cobra.Command) *cobra.Command {
	local := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		cl, err := f.ServerClient()
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
		return exitErr(cl.Run(c.Context(), append(argv, args...), f.IO.Out, f.IO.ErrOut))
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
func remoteUp(c *cobra.Command, f *factory.Factory, cl *server.Client, args []string) error {
	for _, name := range []string{"resume", "coord-addr", "agent-bin", "results", "on-interrupt", "job-id"} {
		if c.Flags().Changed(name) {
			return usagef("up --%s is for a local up; against a server, up FILE [--json] [--detach] (the server keeps the results: `vastfleet down JOB` there)", name)
		}
	}
	path := jobfile.DefaultName
	if len(args) == 1 {
		path = args[0]
	}
	// With --jq the report the server's up prints goes through the
	// expression here, as a local up's would.
	jq, _ := c.Flags().GetString("jq")
	asJSON := c.Flags().Changed("json") || c.Flags().Changed("jq")
	detach, _ := c.Flags().GetBool("detach")
	return exitErr(cl.Up(c.Context(), server.UpOptions{Path: path, Excludes: factory.SyncExcludes(), JSON: asJSON,
		Report: cmdutil.JSONFlags{JSON: asJSON, JQ: jq}.Out(f.IO.Out), Out: f.IO.Out, ErrOut: f.IO.ErrOut, Detach: detach}))
}

// exitErr is the outcome of a command a server ran: err, else its exit
// code (its output, error included, is printed already).
func exitErr(code int, err error) error {
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
	cmdutil.JSONFlags
}

func newContextCmd(f *factory.Factory) *cobra.Command {
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
			c, err := server.NewContext(args[0], args[1], opts.TokenFile, opts.Pin)
			if err != nil {
				return err
			}
			return editContexts(f, func(cs *server.Contexts) error {
				if err := cs.Add(c); err != nil {
					return usageError{err}
				}
				if cs.Current == "" {
					cs.Current = c.Name
				}
				fmt.Fprintf(f.IO.ErrOut, "context %s: %s (current: %s)\n", c.Name, c.URL, cs.Current)
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
				fmt.Fprintf(f.IO.ErrOut, "current context: %s\n", args[0])
				return nil
			})
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the contexts, the current one marked",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := f.ContextsPath()
			if err != nil {
				return err
			}
			cs, err := server.LoadContexts(path)
			if err != nil {
				return err
			}
			return cmdutil.PrintRows(f.IO.Out, opts.JSONFlags, cs.Rows(), server.ContextHeader, server.ContextRow.Cells)
		},
	}
	cmdutil.AddJSONFlags(ls.Flags(), &opts.JSONFlags, "print JSON")
	cmd.AddCommand(add, use, ls)
	return cmd
}

// editContexts edits the contexts file (server.EditContexts).
func editContexts(f *factory.Factory, edit func(*server.Contexts) error) error {
	path, err := f.ContextsPath()
	if err != nil {
		return err
	}
	return server.EditContexts(path, edit)
}
