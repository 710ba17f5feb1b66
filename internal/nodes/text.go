package nodes

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/usage"
)

// Row is a row of an operation's per-node table: its cells under the
// operation's header, and whether the operation failed on that node.
type Row interface {
	Cells() []string
	Failed() bool
}

// Outcome is the outcome of what (the command, setup, ...) on the nodes
// of rows (usage.FanOut).
func Outcome[R Row](what string, rows []R) error {
	n := 0
	for _, r := range rows {
		if r.Failed() {
			n++
		}
	}
	return usage.FanOut(what, n, len(rows))
}

// The per-node tables' headers, each over its row's Cells.
var (
	ExecHeader    = []string{"NODE", "ID", "EXIT", "DURATION", "ERROR"}
	SetupHeader   = []string{"NODE", "ID", "STATUS", "PHASES RUN", "VERIFY", "ERROR"}
	SyncHeader    = []string{"NODE", "ID", "FILES SENT", "FILE BYTES", "WIRE BYTES", "VIA", "ERROR"}
	CollectHeader = []string{"NODE", "ID", "FILES", "FETCHED", "BYTES", "DIR", "SKIPPED", "ERROR"}
)

func (r ExecRow) Cells() []string {
	return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.ExitCode), fmt.Sprintf("%.2fs", r.DurationS), cmdutil.Dash(r.Error)}
}

func (r SetupRow) Failed() bool { return r.Status == "failed" }

func (r SetupRow) Cells() []string {
	v := "-"
	if r.VerifyExit != nil {
		v = "exit " + strconv.Itoa(*r.VerifyExit)
	}
	return []string{r.Node, strconv.FormatInt(r.ID, 10), r.Status, strconv.Itoa(r.PhasesRun), v, cmdutil.Dash(r.Error)}
}

func (r SyncRow) Failed() bool { return r.Error != "" }

func (r SyncRow) Cells() []string {
	return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.FilesSent), strconv.FormatInt(r.FileBytes, 10), strconv.FormatInt(r.WireBytes, 10), cmdutil.Dash(r.Via), cmdutil.Dash(r.Error)}
}

func (r CollectRow) Failed() bool { return r.Error != "" }

func (r CollectRow) Cells() []string {
	return []string{r.Node, strconv.FormatInt(r.ID, 10), strconv.Itoa(r.Files), strconv.Itoa(r.Fetched), strconv.FormatInt(r.FileBytes, 10), r.Dir, cmdutil.Dash(strings.Join(r.Skipped, "; ")), cmdutil.Dash(r.Error)}
}
