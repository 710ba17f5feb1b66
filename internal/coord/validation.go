package coord

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Validation modes (Validation.Mode).
const (
	ValidateNone     = ""
	ValidateReplicas = "replicas"
	ValidateAdaptive = "adaptive"
)

// Adaptive replication, after BOINC's (Anderson, "BOINC: a platform for
// volunteer computing", J. Grid Computing 2020, §6.3, and its scheduler's
// host_app_version.consecutive_valid): a host earns trust on an image
// after TrustAfter consecutive results that agreed with another machine's
// (or a spot check's known answer); a trusted host's result is then
// replicated with probability 1/n, n its count of consecutive valid
// results, so checking falls as trust grows. One disagreement resets n to
// 0 and puts the machine on the bad-host list. BOINC uses 10; so do we.
const (
	TrustAfter = 10
	// maxReplicas bounds the runs of one item that cannot reach a quorum
	// (a command whose output differs from run to run): the item is then
	// kept as it stands, unchecked.
	maxReplicas = 8
)

// Verdicts of one run (a lease and its result).
const (
	verdictUnchecked = ""         // accepted without a check (no validation, or a trusted host)
	verdictValid     = "valid"    // agreed with a quorum or a spot check's known answer
	verdictVerified  = "verified" // the job's verify command passed it
	verdictInvalid   = "invalid"  // disagreed, or verify failed
	verdictDoubted   = "doubted"  // unchecked, from a host caught lying since: not counted
)

// Validation is how a fleet's item results are checked, chosen per job in
// its task file.
type Validation struct {
	Mode     string  // ValidateNone, ValidateReplicas or ValidateAdaptive
	Replicas int     // replicas: runs per item, each on a distinct machine
	Quorum   int     // replicas: how many must agree
	Spot     float64 // share of leases that are spot checks: done items with a validated answer, sent again unmarked
	Verify   string  // a command run here per result and finding; exit 0 = valid
}

// Check says what is wrong with v.
func (v Validation) Check() error {
	switch v.Mode {
	case ValidateNone, ValidateAdaptive:
	case ValidateReplicas:
		if v.Replicas < 2 || v.Replicas > maxReplicas {
			return fmt.Errorf("replicas = %d: want 2 to %d", v.Replicas, maxReplicas)
		}
		if v.Quorum < 1 || v.Quorum > v.Replicas {
			return fmt.Errorf("quorum = %d: want 1 to replicas (%d)", v.Quorum, v.Replicas)
		}
	default:
		return fmt.Errorf("validation mode %q: want replicas or adaptive", v.Mode)
	}
	if !(v.Spot >= 0 && v.Spot < 1) {
		return fmt.Errorf("spot_checks = %v: want a share from 0 to below 1", v.Spot)
	}
	return nil
}

// SetValidation records how the fleet's results are checked; a launch
// sets it with the items, before any agent asks for one.
func (d *DB) SetValidation(ctx context.Context, fleet string, v Validation) error {
	if err := validName("fleet", fleet); err != nil {
		return err
	}
	if err := v.Check(); err != nil {
		return fmt.Errorf("coord: %w", err)
	}
	_, err := d.w.ExecContext(ctx, `INSERT INTO fleet_validation (fleet, mode, replicas, quorum, spot, verify) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (fleet) DO UPDATE SET mode = excluded.mode, replicas = excluded.replicas, quorum = excluded.quorum,
			spot = excluded.spot, verify = excluded.verify`, fleet, v.Mode, v.Replicas, v.Quorum, v.Spot, v.Verify)
	if err != nil {
		return fmt.Errorf("coord: setting validation: %w", err)
	}
	return nil
}

type querier interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func validationOf(ctx context.Context, q querier, fleet string) (Validation, error) {
	var v Validation
	err := q.QueryRowContext(ctx, `SELECT mode, replicas, quorum, spot, verify FROM fleet_validation WHERE fleet = ?`, fleet).
		Scan(&v.Mode, &v.Replicas, &v.Quorum, &v.Spot, &v.Verify)
	if errors.Is(err, sql.ErrNoRows) {
		return Validation{}, nil
	}
	return v, err
}

// FleetValidation is what SetValidation recorded (zero: none).
func (d *DB) FleetValidation(ctx context.Context, fleet string) (Validation, error) {
	return validationOf(ctx, d.db, fleet)
}

// holder is who asks for or reports an item: the credential's node and
// the machine it runs on.
type holder struct {
	node, session string
	machineID     int64
	image         string
}

// host is the key of trust and of "never two replicas on one machine":
// the machine, or the node when the machine is unknown.
func (h holder) host() string {
	if h.machineID != 0 {
		return "machine " + strconv.FormatInt(h.machineID, 10)
	}
	return "node " + h.node
}

// BadHostSink hears of machines caught returning wrong results (the
// caller puts them on the store's bad-host list).
type BadHostSink interface {
	MarkBad(ctx context.Context, machineID int64, reason string) error
}

// caughtHost is a host that disagreed, reported after the commit.
type caughtHost struct {
	host      string
	machineID int64
	reason    string
}

// resultDigest is what replicas compare: the exit code, the outputs'
// sizes and hashes, and the stdout tail. A command whose stdout varies
// from run to run should put its answer in a declared output instead.
func resultDigest(r *wire.ItemResult) string {
	h := sha256.New()
	fmt.Fprintf(h, "exit %d\n", r.ExitCode)
	outs := append([]wire.Output(nil), r.Outputs...)
	sort.Slice(outs, func(i, j int) bool { return outs[i].Path < outs[j].Path })
	for _, o := range outs {
		fmt.Fprintf(h, "out %q %d %s\n", o.Path, o.Bytes, o.SHA256)
	}
	fmt.Fprintf(h, "stdout %q\n", r.StdoutTail)
	return hex.EncodeToString(h.Sum(nil))
}

// run is one lease of an item and what came of it.
type run struct {
	lease, node, host string
	machineID         int64
	image             string
	state             string // leased, reported, lost
	spot              bool
	digest, verdict   string
}

func itemRuns(ctx context.Context, tx *txn, fleet string, item int64) ([]run, error) {
	rows, err := tx.QueryContext(ctx, `SELECT lease, node, host, machine_id, image, state, spot, digest, verdict
		FROM runs WHERE fleet = ? AND item = ? ORDER BY rowid`, fleet, item)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []run
	for rows.Next() {
		var r run
		if err := rows.Scan(&r.lease, &r.node, &r.host, &r.machineID, &r.image, &r.state, &r.spot, &r.digest, &r.verdict); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// counted says whether a reported run counts towards its item's quorum.
func (r run) counted() bool {
	return r.state == "reported" && !r.spot && r.verdict != verdictInvalid && r.verdict != verdictDoubted
}

// policy is an item's need (runs wanted) and quorum (runs that must
// agree) under the fleet's validation; quorum 0 means adaptive has not
// decided yet.
func policy(v Validation, need, quorum int) (int, int) {
	switch v.Mode {
	case ValidateReplicas:
		return max(need, v.Replicas), max(quorum, v.Quorum)
	case ValidateAdaptive:
		return max(need, 1), quorum
	}
	return max(need, 1), max(quorum, 1)
}

// trustOf is the host's count of consecutive valid results on image.
func trustOf(ctx context.Context, tx *txn, host, image string) (int, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT consecutive FROM trust WHERE host = ? AND image = ?`, host, image).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

func credit(ctx context.Context, tx *txn, host, image string, valid bool) error {
	if valid {
		_, err := tx.ExecContext(ctx, `INSERT INTO trust (host, image, consecutive, valid) VALUES (?, ?, 1, 1)
			ON CONFLICT (host, image) DO UPDATE SET consecutive = trust.consecutive + 1, valid = trust.valid + 1`, host, image)
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO trust (host, image, consecutive, invalid) VALUES (?, ?, 0, 1)
		ON CONFLICT (host, image) DO UPDATE SET consecutive = 0, invalid = trust.invalid + 1`, host, image)
	return err
}

// banned is why the host was caught lying, or "".
func banned(ctx context.Context, q querier, host string) (string, error) {
	var reason string
	err := q.QueryRowContext(ctx, `SELECT reason FROM caught WHERE host = ?`, host).Scan(&reason)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return reason, err
}

// setVerdict records a run's verdict and what it does to its host's trust.
func setVerdict(ctx context.Context, tx *txn, fleet string, item int64, r run, verdict string, caught *[]caughtHost, why string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET verdict = ? WHERE fleet = ? AND item = ? AND lease = ?`,
		verdict, fleet, item, r.lease); err != nil {
		return err
	}
	switch verdict {
	case verdictValid, verdictVerified:
		return credit(ctx, tx, r.host, r.image, true)
	case verdictInvalid:
		if err := credit(ctx, tx, r.host, r.image, false); err != nil {
			return err
		}
		reason := fmt.Sprintf("fleet %s item %d: %s", fleet, item, why)
		if _, err := tx.ExecContext(ctx, `INSERT INTO caught (host, machine_id, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			r.host, r.machineID, reason, time.Now().UnixNano()); err != nil {
			return err
		}
		*caught = append(*caught, caughtHost{host: r.host, machineID: r.machineID, reason: reason})
		return recheck(ctx, tx, r.host)
	}
	return nil
}

// recheck doubts every result of a host caught lying that nothing but its
// word supports: those items go back to the queue for two other machines
// to agree on.
func recheck(ctx context.Context, tx *txn, host string) error {
	rows, err := tx.QueryContext(ctx, `SELECT fleet, item, lease FROM runs WHERE host = ? AND state = 'reported' AND verdict = ''`, host)
	if err != nil {
		return err
	}
	type key struct {
		fleet string
		item  int64
		lease string
	}
	var ks []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.fleet, &k.item, &k.lease); err != nil {
			rows.Close()
			return err
		}
		ks = append(ks, k)
	}
	rows.Close()
	for _, k := range ks {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET verdict = ? WHERE fleet = ? AND item = ? AND lease = ?`,
			verdictDoubted, k.fleet, k.item, k.lease); err != nil {
			return err
		}
		// The item is done on this host's word alone (its result was not
		// validated): it needs two other machines to agree now.
		if _, err := tx.ExecContext(ctx, `UPDATE items SET state = 'queued', quorum = CASE WHEN quorum < 2 THEN 2 ELSE quorum END, need = CASE WHEN need < 2 THEN 2 ELSE need END,
			digest = '', validated = 0, done_at = 0
			WHERE fleet = ? AND id = ? AND (state != 'done' OR validated = 0)`, k.fleet, k.item); err != nil {
			return err
		}
	}
	return nil
}

// settle decides an item from its runs: done when a quorum agrees (the
// others are invalid), otherwise queued until enough runs are out.
func settle(ctx context.Context, tx *txn, fleet string, item int64, v Validation, rnd func() float64, caught *[]caughtHost) error {
	var state string
	var need, quorum int
	var digest string
	if err := tx.QueryRowContext(ctx, `SELECT state, need, quorum, digest FROM items WHERE fleet = ? AND id = ?`, fleet, item).
		Scan(&state, &need, &quorum, &digest); err != nil {
		return err
	}
	runs, err := itemRuns(ctx, tx, fleet, item)
	if err != nil {
		return err
	}
	need, quorum = policy(v, need, quorum)
	if state == ItemDone {
		// A replica that comes in after its item was decided is checked
		// against the answer kept.
		for _, r := range runs {
			if r.counted() && r.verdict == verdictUnchecked && digest != "" && quorum >= 2 {
				verdict := verdictValid
				if r.digest != digest {
					verdict = verdictInvalid
				}
				if err := setVerdict(ctx, tx, fleet, item, r, verdict, caught, "its result disagreed with the quorum's"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var counted []run
	leased := 0
	for _, r := range runs {
		switch {
		case r.counted():
			counted = append(counted, r)
		case r.state == "leased" && !r.spot:
			leased++
		}
	}
	if quorum == 0 && len(counted) > 0 {
		// Adaptive: a trusted host's result is replicated with
		// probability 1/n; an untrusted one's always.
		first := counted[0]
		n, err := trustOf(ctx, tx, first.host, first.image)
		if err != nil {
			return err
		}
		quorum = 2
		if first.verdict == verdictVerified || (n >= TrustAfter && rnd() >= 1/float64(n)) {
			quorum = 1
		}
		need = max(need, quorum)
	}
	groups := map[string][]run{}
	best := ""
	for _, r := range counted {
		groups[r.digest] = append(groups[r.digest], r)
		if best == "" || len(groups[r.digest]) > len(groups[best]) {
			best = r.digest
		}
	}
	if best != "" && quorum > 0 && (len(groups[best]) >= quorum || len(counted) >= maxReplicas) {
		win := groups[best]
		validated := len(win) >= 2 && len(win) >= quorum
		for _, r := range win {
			if r.verdict == verdictVerified {
				validated = true
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE items SET state = 'done', need = ?, quorum = ?, digest = ?, validated = ?,
			exit_code = (SELECT exit_code FROM runs WHERE fleet = ? AND item = ? AND lease = ?),
			stdout_tail = (SELECT stdout_tail FROM runs WHERE fleet = ? AND item = ? AND lease = ?),
			outputs = (SELECT outputs FROM runs WHERE fleet = ? AND item = ? AND lease = ?),
			owner_session = (SELECT session FROM runs WHERE fleet = ? AND item = ? AND lease = ?),
			result_node = ?, result_lease = ?, done_at = (SELECT at FROM runs WHERE fleet = ? AND item = ? AND lease = ?),
			lease_expires = 0
			WHERE fleet = ? AND id = ?`,
			need, quorum, best, validated,
			fleet, item, win[0].lease, fleet, item, win[0].lease, fleet, item, win[0].lease, fleet, item, win[0].lease,
			win[0].node, win[0].lease, fleet, item, win[0].lease, fleet, item); err != nil {
			return err
		}
		for _, r := range counted {
			switch {
			case r.digest != best:
				if err := setVerdict(ctx, tx, fleet, item, r, verdictInvalid, caught, "its result disagreed with the quorum's"); err != nil {
					return err
				}
			case validated && len(win) >= 2 && r.verdict == verdictUnchecked:
				if err := setVerdict(ctx, tx, fleet, item, r, verdictValid, caught, ""); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if len(counted) >= need {
		need = len(counted) + 1 // no quorum yet: one more machine decides
	}
	next := ItemQueued
	if leased+len(counted) >= need {
		next = ItemLeased
	}
	_, err = tx.ExecContext(ctx, `UPDATE items SET state = ?, need = ?, quorum = ? WHERE fleet = ? AND id = ?`,
		next, need, quorum, fleet, item)
	return err
}

// HostResults is one host's results in a fleet, by verdict.
type HostResults struct {
	Host      string `json:"host"` // "machine N", or "node NAME" when the machine is unknown
	MachineID int64  `json:"machine_id,omitempty"`
	Nodes     string `json:"nodes"` // the nodes that ran on it, comma-separated
	Validated int    `json:"validated"`
	Rejected  int    `json:"rejected"`
	Unchecked int    `json:"unchecked"`
	Caught    string `json:"caught,omitempty"` // why it is on the bad-host list
}

// HostResults gives, per host, how many of its results were validated
// (agreed with a quorum or a known answer, or passed verify), rejected or
// left unchecked; for a job's report.
func (d *DB) HostResults(ctx context.Context, fleet string) ([]HostResults, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT r.host, max(r.machine_id), `+d.db.listDistinct("r.node")+`,
		sum(CASE WHEN r.verdict IN ('valid', 'verified') THEN 1 ELSE 0 END), sum(CASE WHEN r.verdict = 'invalid' THEN 1 ELSE 0 END),
		sum(CASE WHEN r.verdict IN ('', 'doubted') THEN 1 ELSE 0 END),
		coalesce((SELECT reason FROM caught c WHERE c.host = r.host), '')
		FROM runs r WHERE r.fleet = ? AND r.state = 'reported' GROUP BY r.host ORDER BY r.host`, fleet)
	if err != nil {
		return nil, fmt.Errorf("coord: host results: %w", err)
	}
	defer rows.Close()
	var out []HostResults
	for rows.Next() {
		var h HostResults
		if err := rows.Scan(&h.Host, &h.MachineID, &h.Nodes, &h.Validated, &h.Rejected, &h.Unchecked, &h.Caught); err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, rows.Err()
}

// Caught lists the hosts caught returning wrong results, with the reason.
func (d *DB) Caught(ctx context.Context) (map[string]string, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT host, reason FROM caught`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var h, r string
		if err := rows.Scan(&h, &r); err != nil {
			return nil, err
		}
		out[h] = r
	}
	return out, rows.Err()
}

// Runs is how many leases the fleet's items took, spot checks included:
// the compute the job cost.
func (d *DB) Runs(ctx context.Context, fleet string) (leases, reported int, err error) {
	err = d.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(CASE WHEN state = 'reported' THEN 1 ELSE 0 END), 0) FROM runs WHERE fleet = ?`, fleet).
		Scan(&leases, &reported)
	return leases, reported, err
}

// verdictCounts is the fleet's reported runs by verdict, for /metrics.
func (d *DB) verdictCounts(ctx context.Context, fleet string) (map[string]int64, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT CASE WHEN verdict IN ('valid', 'verified') THEN 'validated'
		WHEN verdict = 'invalid' THEN 'rejected' ELSE 'unchecked' END, count(*)
		FROM runs WHERE fleet = ? AND state = 'reported' GROUP BY 1`, fleet)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{"validated": 0, "rejected": 0, "unchecked": 0}
	for rows.Next() {
		var k string
		var n int64
		if err := rows.Scan(&k, &n); err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, rows.Err()
}

func marshalOutputs(o []wire.Output) (string, error) {
	if len(o) == 0 {
		return "", nil
	}
	b, err := json.Marshal(o)
	return string(b), err
}

// hostList is for log lines.
func hostList(cs []caughtHost) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.host)
	}
	return b.String()
}
