// Package buildinfo says what a binary was built from, for `version` and
// --version.
package buildinfo

import "runtime/debug"

// Info is what this binary was built from: the version (a release's,
// else the module's own) and the VCS commit Go stamped into it.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Modified  bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	GoVersion string `json:"go_version"`
}

// Read is this binary's Info; version is the one set at build time
// ("dev" when none was: the module's version then).
func Read(version string) Info {
	b := Info{Version: version}
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

// String is the version, the commit cut to 12 characters and whether
// the tree had changes, and the Go version.
func (b Info) String() string {
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
