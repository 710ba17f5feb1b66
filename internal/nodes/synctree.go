package nodes

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/ignore"
	"github.com/vastfleet/vastfleet/internal/remote"
)

// DefaultExcludes keep weights, data and caches off the wire, in
// .gitignore syntax; the tree's .gitignore and .vastfleetignore files
// come over them and may re-include (!data/), and extra excludes over all.
var DefaultExcludes = []string{"*.pt", "*.pth", "*.ckpt", "__pycache__", ".git", "data/", "wandb/", "outputs/"}

// ScanSource reads the tree at src as sync sends it, every file hashed:
// DefaultExcludes, then the tree's ignore files, then excludes.
func ScanSource(src string, excludes []string) ([]remote.TreeFile, error) {
	var extra []ignore.Rule
	for _, pat := range excludes {
		if r, ok := ignore.ParseLine("", pat); ok {
			extra = append(extra, r)
		}
	}
	files, err := remote.ScanTree(src, ignore.Parse("", strings.Join(DefaultExcludes, "\n")), extra)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	return files, nil
}

// String is what a sync cost, as sync prints it: one line, and a second
// with how long the last node waited.
func (s SyncSummary) String() string {
	out := fmt.Sprintf("synced %d files (%s) to %d nodes, %d of them relayed by other nodes; this machine sent %s over SSH (%s for the archives)\n",
		s.Files, humanBytes(s.TreeBytes), s.Nodes, s.Relayed, humanBytes(s.Sent), humanBytes(s.Archives))
	if s.LastNode > 0 {
		bound := ""
		if s.LinkBound > 0 {
			bound = fmt.Sprintf(" (its archive over the slowest listed downlink takes %s)", s.LinkBound.Round(time.Millisecond))
		}
		out += fmt.Sprintf("the last node had the tree %s after the sync began%s\n", s.LastNode.Round(time.Millisecond), bound)
	}
	return out
}

// humanBytes is n in B, KiB, MiB or GiB, one decimal.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/unit, 0
	for v >= unit && i < 2 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %s", v, []string{"KiB", "MiB", "GiB"}[i])
}
