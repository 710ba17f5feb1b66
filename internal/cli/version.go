package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/buildinfo"
	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/factory"
)

// versionOptions is what `version` was asked.
type versionOptions struct {
	cmdutil.JSONFlags
}

// newVersionCmd parses into versionOptions and hands them to runF (tests)
// or versionRun.
func newVersionCmd(f *factory.Factory, runF func(context.Context, *versionOptions) error) *cobra.Command {
	opts := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, f, opts, runF, versionRun)
		},
	}
	cmdutil.AddJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// versionRun is `version` once its flags are parsed.
func versionRun(_ context.Context, f *factory.Factory, opts *versionOptions) error {
	b := buildinfo.Read(Version)
	if opts.JSON {
		return cmdutil.WriteJSON(opts.Out(f.IO.Out), b)
	}
	_, err := fmt.Fprintf(f.IO.Out, "vastfleet %s\n", b)
	return err
}
