package cli

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what this binary was built from: the module version (set
// with -ldflags "-X .../cli.Version=..." for releases, else the module's
// own) and the VCS commit Go stamped into it.
type buildInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	GoVersion string `json:"go_version"`
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: Version}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if b.Version == "dev" && bi.Main.Version != "" {
		b.Version = bi.Main.Version // "(devel)" for a build from a checkout
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

func (b buildInfo) String() string {
	s := b.Version
	if b.Commit != "" {
		c := b.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += " (commit " + c
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	if b.GoVersion != "" {
		s += " " + b.GoVersion
	}
	return s
}

// versionOptions is what `version` was asked.
type versionOptions struct {
	JSONFlags
}

// newVersionCmd parses into versionOptions and hands them to runF (tests)
// or versionRun.
func newVersionCmd(f *factory, runF func(context.Context, *versionOptions) error) *cobra.Command {
	opts := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this binary was built from",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return versionRun(cmd.Context(), f, opts)
		},
	}
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print JSON")
	return cmd
}

// versionRun is `version` once its flags are parsed.
func versionRun(_ context.Context, f *factory, opts *versionOptions) error {
	b := readBuildInfo()
	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), b)
	}
	_, err := fmt.Fprintf(f.io.Out, "vastfleet %s\n", b)
	return err
}
