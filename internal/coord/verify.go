package coord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Verifier runs a job's verify command on the coordinator's machine: env
// adds to this process's environment, stdin is what is checked. ok is
// the command's exit 0; err is a command that could not run at all
// (which rejects nothing: the result stays unchecked).
type Verifier interface {
	Verify(ctx context.Context, command string, env []string, stdin []byte) (ok bool, err error)
}

// VerifyTimeout bounds one verify run.
const VerifyTimeout = time.Minute

// ShellVerifier runs the command with /bin/sh -c.
type ShellVerifier struct{}

// Verify runs command; a non-zero exit is a rejection.
func (ShellVerifier) Verify(ctx context.Context, command string, env []string, stdin []byte) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, VerifyTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, fmt.Errorf("verify command ran past %v", VerifyTimeout)
	case errors.As(err, &exit):
		return false, nil
	default:
		return false, fmt.Errorf("verify command: %w", err)
	}
}

// Environment of a verify command, beside the item's own (wire.EnvItem,
// wire.EnvItemID).
const (
	EnvVerifyExit    = "VASTFLEET_EXIT_CODE"   // a result's exit code
	EnvVerifyOutputs = "VASTFLEET_OUTPUTS"     // a result's outputs, JSON
	EnvVerifyKey     = "VASTFLEET_FINDING_KEY" // a finding's key
	EnvVerifyNode    = "VASTFLEET_NODE"        // who sent it
)

func (s *Server) verifier() Verifier {
	if s.cfg.Verify != nil {
		return s.cfg.Verify
	}
	return ShellVerifier{}
}

// verifyResult runs the fleet's verify command on a result (its stdout
// tail on stdin): verdictVerified, verdictInvalid, or "" when the job has
// none or it could not run.
func (s *Server) verifyResult(ctx context.Context, fleet string, v Validation, c caller, res *wire.ItemResult) string {
	if v.Verify == "" {
		return ""
	}
	value, err := s.db.itemValue(ctx, fleet, res.ID)
	if err != nil {
		return ""
	}
	outs, _ := marshalOutputs(res.Outputs)
	ok, err := s.verifier().Verify(ctx, v.Verify, []string{
		wire.EnvItem + "=" + value, wire.EnvItemID + "=" + strconv.FormatInt(res.ID, 10),
		EnvVerifyExit + "=" + strconv.Itoa(res.ExitCode), EnvVerifyOutputs + "=" + outs, EnvVerifyNode + "=" + c.node,
	}, []byte(res.StdoutTail))
	switch {
	case err != nil:
		s.log.Warn("verify command failed to run; the result stays unchecked", "fleet", fleet, "item", res.ID, "err", err)
		return ""
	case ok:
		return verdictVerified
	}
	return verdictInvalid
}

// verifyFindings runs the fleet's verify command on each finding (its
// data on stdin) and drops those it rejects: they are acknowledged, so the
// agent's spool drains, but not stored, counted against the node, and
// the host goes on the bad-host list.
func (s *Server) verifyFindings(w http.ResponseWriter, r *http.Request, c caller, fs *wire.Findings) (rejected []string, ok bool) {
	v, err := s.db.FleetValidation(r.Context(), c.fleet)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "findings not stored, send them again")
		return nil, false
	}
	if v.Verify == "" {
		return nil, true
	}
	kept := fs.Items[:0:0]
	for _, f := range fs.Items {
		ok, err := s.verifier().Verify(r.Context(), v.Verify, []string{
			EnvVerifyKey + "=" + f.Key, wire.EnvItemID + "=" + strconv.FormatInt(f.Item, 10), EnvVerifyNode + "=" + c.node,
		}, f.Data)
		if err != nil || ok {
			kept = append(kept, f)
			continue
		}
		rejected = append(rejected, f.Key)
	}
	if len(rejected) > 0 {
		s.refuse(c.fleet, c.node)
		h := holder{node: c.node, machineID: c.machineID, image: c.image}
		reason := fmt.Sprintf("fleet %s: the job's verify command rejected finding %q", c.fleet, rejected[0])
		if err := s.db.catch(r.Context(), h.host(), h.machineID, reason); err != nil {
			s.log.Warn("recording a caught host failed", "err", err)
		}
		s.reportCaught(r.Context(), []caughtHost{{host: h.host(), machineID: h.machineID, reason: reason}})
	}
	fs.Items = kept
	return rejected, true
}

// itemValue is an item's value.
func (d *DB) itemValue(ctx context.Context, fleet string, id int64) (string, error) {
	var v string
	err := d.db.QueryRowContext(ctx, `SELECT value FROM items WHERE fleet = ? AND id = ?`, fleet, id).Scan(&v)
	return v, err
}

// catch records a host caught outside a result (a rejected finding).
func (d *DB) catch(ctx context.Context, host string, machineID int64, reason string) error {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO caught (host, machine_id, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		host, machineID, reason, time.Now().UnixNano()); err != nil {
		return err
	}
	if err := recheck(ctx, tx, host); err != nil {
		return err
	}
	return tx.Commit()
}

// reportCaught tells the bad-host list about hosts caught lying.
func (s *Server) reportCaught(ctx context.Context, cs []caughtHost) {
	if len(cs) == 0 {
		return
	}
	s.log.Warn("hosts returned wrong results: on the bad-host list, their unchecked results are checked again", "hosts", hostList(cs))
	if s.cfg.BadHosts == nil {
		return
	}
	for _, c := range cs {
		if c.machineID == 0 {
			continue
		}
		if err := s.cfg.BadHosts.MarkBad(ctx, c.machineID, c.reason); err != nil {
			s.log.Warn("marking a bad host failed", "machine", c.machineID, "err", err)
		}
	}
}
