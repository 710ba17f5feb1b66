package coord

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Item states.
const (
	ItemQueued = "queued"
	ItemLeased = "leased"
	ItemDone   = "done"
)

// maxItemLen bounds one item's value: it goes into a shell command line.
const maxItemLen = 4096

// ErrNoSuchItem is a result for an item id the fleet does not have.
var ErrNoSuchItem = errors.New("no such item in this fleet")

func validItem(v string) error {
	switch {
	case v == "":
		return errors.New("an item is empty")
	case len(v) > maxItemLen:
		return fmt.Errorf("an item is longer than %d bytes", maxItemLen)
	case !utf8.ValidString(v):
		return errors.New("an item is not valid UTF-8")
	}
	for _, r := range v {
		if r != '\t' && !unicode.IsPrint(r) {
			return fmt.Errorf("item %q contains the non-printable character %U", v, r)
		}
	}
	return nil
}

// AddItems queues the fleet's work items. It is idempotent: a value the
// fleet already has (queued, leased or done) is left as it is, so adding
// the same list again, or a longer one, adds only what is new. New items
// get the next ids, in the order given.
func (d *DB) AddItems(ctx context.Context, fleet string, values []string) error {
	if err := validName("fleet", fleet); err != nil {
		return err
	}
	for _, v := range values {
		if err := validItem(v); err != nil {
			return fmt.Errorf("coord: %w", err)
		}
	}
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("coord: adding items: %w", err)
	}
	defer tx.Rollback()
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(id), 0) + 1 FROM items WHERE fleet = ?`, fleet).Scan(&next); err != nil {
		return fmt.Errorf("coord: adding items: %w", err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO items (fleet, id, value) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)
	if err != nil {
		return fmt.Errorf("coord: adding items: %w", err)
	}
	defer st.Close()
	for _, v := range values {
		res, err := st.ExecContext(ctx, fleet, next, v)
		if err != nil {
			return fmt.Errorf("coord: adding items: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			next++
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("coord: adding items: %w", err)
	}
	return nil
}

// ItemCounts is how many of the fleet's items are queued, leased and
// done. A lease that has expired counts as leased until the coordinator
// notices (within a second while it runs).
func (d *DB) ItemCounts(ctx context.Context, fleet string) (queued, leased, done int, err error) {
	rows, err := d.db.QueryContext(ctx, `SELECT state, count(*) FROM items WHERE fleet = ? GROUP BY state`, fleet)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("coord: item counts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			return 0, 0, 0, err
		}
		switch state {
		case ItemQueued:
			queued = n
		case ItemLeased:
			leased = n
		case ItemDone:
			done = n
		}
	}
	return queued, leased, done, rows.Err()
}

// ItemResult is a done item with the first result received for it.
type ItemResult struct {
	ID         int64
	Value      string
	ExitCode   int
	StdoutTail string
	Outputs    []wire.Output
	Node       string // the node whose result was kept
	Session    string // the session that had the item when it was kept
	Lease      string // the lease the kept result named
	Attempts   int    // how often the item was leased
	Results    int    // how many results arrived (replays and second runs included)
	DoneAt     time.Time
}

// ItemResults lists the fleet's done items, by id.
func (d *DB) ItemResults(ctx context.Context, fleet string) ([]ItemResult, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, value, coalesce(exit_code, 0), stdout_tail, outputs,
		result_node, owner_session, result_lease, attempts, results, done_at
		FROM items WHERE fleet = ? AND state = 'done' ORDER BY id`, fleet)
	if err != nil {
		return nil, fmt.Errorf("coord: item results: %w", err)
	}
	defer rows.Close()
	var out []ItemResult
	for rows.Next() {
		var r ItemResult
		var outputs string
		var doneAt int64
		if err := rows.Scan(&r.ID, &r.Value, &r.ExitCode, &r.StdoutTail, &outputs,
			&r.Node, &r.Session, &r.Lease, &r.Attempts, &r.Results, &doneAt); err != nil {
			return nil, err
		}
		if outputs != "" {
			_ = json.Unmarshal([]byte(outputs), &r.Outputs)
		}
		r.DoneAt = time.Unix(0, doneAt).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// ItemStatus is one item as it stands.
type ItemStatus struct {
	ID       int64
	Value    string
	State    string // ItemQueued, ItemLeased or ItemDone
	Node     string // leased: the holder; done: whose result was kept
	Session  string
	Attempts int // how often it was leased
}

// Items lists every item of the fleet, by id.
func (d *DB) Items(ctx context.Context, fleet string) ([]ItemStatus, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT id, value, state,
		CASE state WHEN 'done' THEN result_node ELSE owner_node END, owner_session, attempts
		FROM items WHERE fleet = ? ORDER BY id`, fleet)
	if err != nil {
		return nil, fmt.Errorf("coord: items: %w", err)
	}
	defer rows.Close()
	var out []ItemStatus
	for rows.Next() {
		var s ItemStatus
		if err := rows.Scan(&s.ID, &s.Value, &s.State, &s.Node, &s.Session, &s.Attempts); err != nil {
			return nil, err
		}
		if s.State == ItemQueued {
			s.Session = ""
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// errNotHolder is a result for a lease its sender never held.
var errNotHolder = errors.New("this node holds no such lease of the item")

// errCaught is a lease request from a host caught returning wrong results.
var errCaught = errors.New("this machine returned wrong results and gets no more items")

// leaseItem gives the session the fleet's lowest queued item that its
// machine has not run, until expires, first putting back whatever that
// session held: a worker runs one item at a time, so an item it still
// holds when it asks again was abandoned (its agent restarted, or its
// result was already sent). Under spot checks a share of the leases are
// items already validated, sent again unmarked. With no item for it, left
// says how many are not done.
func (d *DB) leaseItem(ctx context.Context, fleet string, h holder, expires time.Time, rnd func() float64) (it *wire.Item, lease string, left int64, err error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, "", 0, err
	}
	defer tx.Rollback()
	if why, err := banned(ctx, tx, h.host()); err != nil {
		return nil, "", 0, err
	} else if why != "" {
		return nil, "", 0, fmt.Errorf("%w (%s)", errCaught, why)
	}
	v, err := validationOf(ctx, tx, fleet)
	if err != nil {
		return nil, "", 0, err
	}
	if err := releaseHeld(ctx, tx, fleet, h); err != nil {
		return nil, "", 0, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM items WHERE fleet = ? AND state != 'done'`, fleet).Scan(&left); err != nil {
		return nil, "", 0, err
	}
	var item wire.Item
	var attempts int
	spot := false
	notMine := ` AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.fleet = i.fleet AND r.item = i.id AND r.state != 'lost' AND r.host = ?)`
	if left > 0 && v.Spot > 0 && rnd() < v.Spot {
		err = tx.QueryRowContext(ctx, `SELECT id, value, attempts FROM items i WHERE fleet = ? AND state = 'done' AND validated = 1`+notMine+
			` ORDER BY random() LIMIT 1`, fleet, h.host()).Scan(&item.ID, &item.Value, &attempts)
		switch {
		case err == nil:
			spot = true
		case !errors.Is(err, sql.ErrNoRows):
			return nil, "", 0, err
		}
	}
	if !spot {
		err = tx.QueryRowContext(ctx, `SELECT id, value, attempts FROM items i WHERE fleet = ? AND state = 'queued'`+notMine+
			` ORDER BY id LIMIT 1`, fleet, h.host()).Scan(&item.ID, &item.Value, &attempts)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, "", left, tx.Commit()
		}
		if err != nil {
			return nil, "", 0, err
		}
	}
	lease = strconv.Itoa(attempts + 1)
	if _, err := tx.ExecContext(ctx, `INSERT INTO runs (fleet, item, lease, node, session, host, machine_id, image, spot, expires)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		fleet, item.ID, lease, h.node, h.session, h.host(), h.machineID, h.image, spot, expires.UnixNano()); err != nil {
		return nil, "", 0, err
	}
	if spot {
		_, err = tx.ExecContext(ctx, `UPDATE items SET attempts = attempts + 1 WHERE fleet = ? AND id = ?`, fleet, item.ID)
	} else {
		_, err = tx.ExecContext(ctx, `UPDATE items SET lease = ?, owner_node = ?, owner_session = ?,
			lease_expires = ?, attempts = attempts + 1 WHERE fleet = ? AND id = ?`,
			lease, h.node, h.session, expires.UnixNano(), fleet, item.ID)
		if err == nil {
			err = settle(ctx, tx, fleet, item.ID, v, rnd, new([]caughtHost))
		}
	}
	if err != nil {
		return nil, "", 0, err
	}
	if err := tx.Commit(); err != nil {
		return nil, "", 0, err
	}
	return &item, lease, left, nil
}

// releaseHeld puts back in the queue what the session holds.
func releaseHeld(ctx context.Context, tx *txn, fleet string, h holder) error {
	rows, err := tx.QueryContext(ctx, `SELECT item FROM runs WHERE fleet = ? AND node = ? AND session = ? AND state = 'leased'`,
		fleet, h.node, h.session)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'lost' WHERE fleet = ? AND node = ? AND session = ? AND state = 'leased'`,
		fleet, h.node, h.session); err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE items SET state = 'queued', owner_node = '', lease = '', lease_expires = 0
			WHERE fleet = ? AND id = ? AND state = 'leased'`, fleet, id); err != nil {
			return err
		}
	}
	return nil
}

// recordResult takes a result for a run its sender holds: errNotHolder
// for any other (an item it never leased, another node's lease). A replay,
// or a result for a lease that was lost meanwhile, is acknowledged and not
// stored. Under validation the item is done once a quorum agrees; the
// hosts that disagreed come back in caught. verdict is the verify
// command's ("" when the job has none).
func (d *DB) recordResult(ctx context.Context, fleet string, h holder, r *wire.ItemResult, verdict string, now time.Time,
	rnd func() float64) (stored bool, caught []caughtHost, err error) {
	outputs, err := marshalOutputs(r.Outputs)
	if err != nil {
		return false, nil, err
	}
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return false, nil, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE items SET results = results + 1 WHERE fleet = ? AND id = ?`, fleet, r.ID)
	if err != nil {
		return false, nil, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil, ErrNoSuchItem
	}
	var node, state string
	var spot bool
	err = tx.QueryRowContext(ctx, `SELECT node, state, spot FROM runs WHERE fleet = ? AND item = ? AND lease = ?`, fleet, r.ID, r.Lease).
		Scan(&node, &state, &spot)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && node != h.node) {
		return false, nil, errNotHolder
	}
	if err != nil {
		return false, nil, err
	}
	if state != "leased" {
		return false, nil, tx.Commit()
	}
	digest := resultDigest(r)
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'reported', exit_code = ?, stdout_tail = ?, outputs = ?, digest = ?, at = ?
		WHERE fleet = ? AND item = ? AND lease = ?`,
		r.ExitCode, r.StdoutTail, outputs, digest, now.UnixNano(), fleet, r.ID, r.Lease); err != nil {
		return false, nil, err
	}
	v, err := validationOf(ctx, tx, fleet)
	if err != nil {
		return false, nil, err
	}
	me := run{lease: r.Lease, node: h.node, host: h.host(), machineID: h.machineID, image: h.image, state: "reported", spot: spot, digest: digest}
	if spot {
		var known string
		if err := tx.QueryRowContext(ctx, `SELECT digest FROM items WHERE fleet = ? AND id = ?`, fleet, r.ID).Scan(&known); err != nil {
			return false, nil, err
		}
		verdict := verdictValid
		if digest != known {
			verdict = verdictInvalid
		}
		if err := setVerdict(ctx, tx, fleet, r.ID, me, verdict, &caught, "its result disagreed with a known answer (spot check)"); err != nil {
			return false, nil, err
		}
		return true, caught, tx.Commit()
	}
	if verdict != "" {
		if err := setVerdict(ctx, tx, fleet, r.ID, me, verdict, &caught, "the job's verify command rejected its result"); err != nil {
			return false, nil, err
		}
	}
	if err := settle(ctx, tx, fleet, r.ID, v, rnd, &caught); err != nil {
		return false, nil, err
	}
	return true, caught, tx.Commit()
}

// expireLeases looks at every lease (of fleet, or of all fleets when
// fleet is "") whose time has passed. Heartbeats renew their node's
// leases, and only its own: lastSeen gives a node's latest (the node of
// the credential that sent it), and a lease whose node was heard from
// within ttl is extended to ttl past that heartbeat. The others are lost
// and their items go back to the queue. It reports how many did.
func (d *DB) expireLeases(ctx context.Context, fleet string, now time.Time, ttl time.Duration,
	lastSeen func(fleet, node string) (time.Time, bool)) (requeued int, err error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	q := `SELECT fleet, item, lease, node FROM runs WHERE state = 'leased' AND expires < ?`
	args := []any{now.UnixNano()}
	if fleet != "" {
		q += ` AND fleet = ?`
		args = append(args, fleet)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	type due struct {
		fleet, lease, node string
		id                 int64
	}
	var dues []due
	for rows.Next() {
		var x due
		if err := rows.Scan(&x.fleet, &x.id, &x.lease, &x.node); err != nil {
			rows.Close()
			return 0, err
		}
		dues = append(dues, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(dues) == 0 {
		return 0, nil
	}
	for _, x := range dues {
		if seen, ok := lastSeen(x.fleet, x.node); ok && now.Sub(seen) < ttl {
			if _, err := tx.ExecContext(ctx, `UPDATE runs SET expires = ? WHERE fleet = ? AND item = ? AND lease = ?`,
				seen.Add(ttl).UnixNano(), x.fleet, x.id, x.lease); err != nil {
				return 0, err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE items SET lease_expires = ? WHERE fleet = ? AND id = ? AND lease = ? AND state = 'leased'`,
				seen.Add(ttl).UnixNano(), x.fleet, x.id, x.lease); err != nil {
				return 0, err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = 'lost' WHERE fleet = ? AND item = ? AND lease = ?`,
			x.fleet, x.id, x.lease); err != nil {
			return 0, err
		}
		res, err := tx.ExecContext(ctx, `UPDATE items SET state = 'queued', owner_node = '', lease = '', lease_expires = 0
			WHERE fleet = ? AND id = ? AND state = 'leased'`, x.fleet, x.id)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			requeued++
		}
	}
	return requeued, tx.Commit()
}

// itemCounts are a fleet's items: done, not done, and of those not done
// the starved ones, queued with no enrolled machine left that may run
// them.
type itemCounts struct{ done, left, starved int64 }

// starvedItems counts, per fleet, the queued items that no enrolled,
// uncaught machine may take: each has run on every such machine already
// (its results disagreed and it needs one more), or none is left. Items
// never run can starve only when no eligible machine is left, so the
// per-item check is confined to items already run. A fleet with no
// machine enrolled at all starves nothing: that is the job's "no node
// alive", not a dispute.
const starvedItems = `
WITH eligible AS (
	SELECT c.fleet, c.machine_id,
		CASE WHEN c.machine_id != 0 THEN 'machine ' || c.machine_id ELSE 'node ' || c.node END AS host
	FROM credentials c
	WHERE c.revoked_at = 0
		AND NOT EXISTS (SELECT 1 FROM caught k WHERE k.host =
			CASE WHEN c.machine_id != 0 THEN 'machine ' || c.machine_id ELSE 'node ' || c.node END)
)
SELECT i.fleet, count(*) FROM items i
WHERE i.state = 'queued'
	AND EXISTS (SELECT 1 FROM credentials c WHERE c.fleet = i.fleet AND c.revoked_at = 0)
	AND (NOT EXISTS (SELECT 1 FROM eligible e WHERE e.fleet = i.fleet)
	OR (i.attempts > 0 AND NOT EXISTS (
		SELECT 1 FROM eligible e WHERE e.fleet = i.fleet AND NOT EXISTS (
			SELECT 1 FROM runs r WHERE r.fleet = i.fleet AND r.item = i.id AND r.state != 'lost' AND r.host = e.host))))
GROUP BY i.fleet`

// allItemCounts is every fleet's done and not-done item counts, for the
// live totals.
func (d *DB) allItemCounts(ctx context.Context) (map[string]itemCounts, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT fleet, state = 'done', count(*) FROM items GROUP BY fleet, state = 'done'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]itemCounts{}
	for rows.Next() {
		var fleet string
		var done bool
		var n int64
		if err := rows.Scan(&fleet, &done, &n); err != nil {
			return nil, err
		}
		c := out[fleet]
		if done {
			c.done = n
		} else {
			c.left = n
		}
		out[fleet] = c
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	starved, err := d.db.QueryContext(ctx, starvedItems)
	if err != nil {
		return nil, err
	}
	defer starved.Close()
	for starved.Next() {
		var fleet string
		var n int64
		if err := starved.Scan(&fleet, &n); err != nil {
			return nil, err
		}
		c := out[fleet]
		c.starved = n
		out[fleet] = c
	}
	return out, starved.Err()
}

// NodeInstances maps each node name of the fleet to the instance its
// credential was issued to (revoked ones included: a report counts the
// results of nodes gone since).
func (d *DB) NodeInstances(ctx context.Context, fleet string) (map[string]int64, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT node, max(instance_id) FROM credentials WHERE fleet = ? GROUP BY node`, fleet)
	if err != nil {
		return nil, fmt.Errorf("coord: node instances: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var node string
		var id int64
		if err := rows.Scan(&node, &id); err != nil {
			return nil, err
		}
		out[node] = id
	}
	return out, rows.Err()
}
