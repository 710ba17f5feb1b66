package scalebench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/vastfleet/vastfleet/internal/cmdutil"
	"github.com/vastfleet/vastfleet/internal/termsafe"
)

// UsageHeader is the columns of the process tables of Phase.Rows and
// Summary.Rows.
var UsageHeader = []string{"PROCESS", "CPU S", "PEAK RSS MB", "PEAK FDS", "PROCS"}

// Lines is what a person reads of the phase above its process table: what
// it reached, then its error and the command it ran, if any.
func (p Phase) Lines() []string {
	head := fmt.Sprintf("%s: %d of %d nodes, %.1f s", p.Phase, p.OK, p.Nodes, p.WallS)
	switch {
	case p.Skipped:
		head = fmt.Sprintf("%s: skipped (%s)", p.Phase, p.Note)
	case p.Note != "":
		head += " (" + p.Note + ")"
	}
	if p.MemAvailableMinMB != nil {
		head += fmt.Sprintf("; available memory at least %.0f MB", *p.MemAvailableMinMB)
	}
	lines := []string{head}
	if p.Error != "" {
		lines = append(lines, "  error: "+termsafe.Line(p.Error))
	}
	if p.Command != "" && !p.Skipped {
		lines = append(lines, "  "+termsafe.Line(p.Command))
	}
	return lines
}

// Rows is the phase's process table under UsageHeader; a skipped phase
// has none.
func (p Phase) Rows() [][]string {
	if p.Skipped {
		return nil
	}
	rows := [][]string{}
	for _, u := range p.Usage {
		rows = append(rows, []string{u.Process, numOrNA(u.CPUS, 2), numOrNA(u.PeakRSSMB, 1), intOrNA(u.PeakFDs), intOrBlank(u.Procs)})
	}
	return rows
}

// Lines is what a person reads of the whole run above its process table:
// what each phase reached, sync's and exec's yardsticks, the shortfall.
func (s Summary) Lines() []string {
	lines := []string{fmt.Sprintf("%d nodes: %d ready, job done on %d (%d findings), exec on %d, sync to %d, collect from %d, %d destroyed; %.1f s in all (%.1f s to start the market and coordinator)",
		s.Nodes, s.Ready, s.JobOK, s.Findings, s.ExecOK, s.SyncOK, s.CollectOK, s.Destroyed, s.WallS, s.SetupS)}
	if s.SyncLastS > 0 && s.SyncLinkS > 0 {
		lines = append(lines, fmt.Sprintf("sync: the last node held the tree after %.1fs, %.1fx the %.1fs its archive takes over the slowest listed downlink", s.SyncLastS, s.SyncLastS/s.SyncLinkS, s.SyncLinkS))
	}
	if s.ExecSpeedup > 0 {
		lines = append(lines, fmt.Sprintf("exec -- true was %.1fx faster than the system ssh run 32 at a time (%d nodes reached)", s.ExecSpeedup, s.SSHOK))
		if s.ExecCPUS > 0 && s.SSHCPUS > 0 {
			lines = append(lines, fmt.Sprintf("  CPU, client and simulated hosts: exec %.1fs, ssh %.1fs (%.1fx), both on this computer's cores", s.ExecCPUS, s.SSHCPUS, s.SSHCPUS/s.ExecCPUS))
		}
	}
	if s.Failed != "" {
		lines = append(lines, "first shortfall: "+termsafe.Line(s.Failed))
	}
	return lines
}

// Rows is each process's CPU over the run and peaks, under UsageHeader.
func (s Summary) Rows() [][]string {
	return [][]string{
		{"vastfleet (commands)", ff(s.CPUS, 1), ff(s.PeakRSSMB, 1), strconv.Itoa(s.PeakFDs), ""},
		{"coord", ff(s.CoordCPUS, 1), ff(s.CoordPeakRSSMB, 1), strconv.Itoa(s.CoordPeakFDs), ""},
		{"sim", ff(s.SimCPUS, 1), ff(s.SimPeakRSSMB, 1), strconv.Itoa(s.SimPeakFDs), ""},
		{"hosts", ff(s.HostsCPUS, 1), ff(s.HostsPeakRSSMB, 1), "", strconv.Itoa(s.HostsPeakProcs)},
	}
}

// After is the line under the summary's table: what destroy left behind.
func (s Summary) After() string {
	line := fmt.Sprintf("after destroy: the simulator holds %.1f MB, %d of its machines' processes left", s.SimRSSAfterMB, s.HostsLeft)
	if s.FDLimit > 0 {
		line += fmt.Sprintf("; open-file limit %d", s.FDLimit)
	}
	return line
}

func ff(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

func numOrNA(v *float64, prec int) string {
	if v == nil {
		return "n/a"
	}
	return ff(*v, prec)
}

func intOrNA(v *int) string {
	if v == nil {
		return "n/a"
	}
	return strconv.Itoa(*v)
}

func intOrBlank(v *int) string {
	if v == nil {
		return ""
	}
	return strconv.Itoa(*v)
}

// Printer writes each phase as it ends and then the summary: one JSON
// line each on a JSON writer, else its lines and its process table.
type Printer struct {
	w   io.Writer
	enc *json.Encoder
	err error // the first phase that could not be written
}

// NewPrinter prints on w, or as JSON lines on jsonOut when that is not nil.
func NewPrinter(w, jsonOut io.Writer) *Printer {
	p := &Printer{w: w}
	if jsonOut != nil {
		p.enc = json.NewEncoder(jsonOut)
	}
	return p
}

// Phase prints a phase (Config.OnPhase).
func (pr *Printer) Phase(p Phase) {
	if err := pr.write(p, p.Lines(), p.Rows(), ""); pr.err == nil {
		pr.err = err
	}
}

// Summary prints the summary, or the error a phase's printing met.
func (pr *Printer) Summary(s Summary) error {
	if pr.err != nil {
		return pr.err
	}
	return pr.write(s, s.Lines(), s.Rows(), s.After())
}

// write writes a phase or the summary: one JSON line, else its lines,
// its process table (none for a skipped phase) and after.
func (pr *Printer) write(v any, lines []string, rows [][]string, after string) error {
	if pr.enc != nil {
		return pr.enc.Encode(v)
	}
	for _, l := range lines {
		fmt.Fprintln(pr.w, l)
	}
	if rows == nil {
		return nil
	}
	if err := cmdutil.WriteTable(pr.w, UsageHeader, rows); err != nil {
		return err
	}
	fmt.Fprintln(pr.w, after)
	return nil
}
