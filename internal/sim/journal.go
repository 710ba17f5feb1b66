package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
)

// A persisted market is a snapshot (stateFile, written whole and
// atomically) and a journal beside it (journalFile): one JSON line per save
// holding only what changed since the save before, appended and synced, so
// that a request costs one small write and one fsync rather than the whole
// state, a rename and two fsyncs.
//
// The journal's first line names the generation of the snapshot it follows
// (state.Gen). Compaction writes a snapshot of the next generation, then
// replaces the journal with an empty one of that generation; a crash in
// between leaves a journal of an older generation, which opening ignores:
// the newer snapshot holds everything it said. A market without a snapshot
// has no journal either (Open removes one left by a reset).
const journalFile = "sim-journal.jsonl"

// journalMinBytes is the least a journal grows to before compaction; past
// it, the journal is compacted once it would outgrow the snapshot, so that
// replay never reads more than about two snapshots' worth.
var journalMinBytes int64 = 256 << 10

// journal is a persisted market's journal and what its files hold. m.mu
// guards it.
type journal struct {
	f       *os.File // open O_APPEND; nil: the next save compacts
	size    int64    // bytes in the journal file
	limit   int64    // compact rather than grow the journal past this
	compact bool     // the next save compacts (Close)
	base    baseline

	cost persistCost
}

// persistCost is what persisting has cost so far (for the benchmark).
type persistCost struct {
	written, syncs int64 // bytes written; fsyncs, a directory's included
	snapshots      int64 // compactions
	lines          int64 // journal lines appended
	lineBytes      int64 // their bytes
}

// baseline is what the snapshot and journal hold, for diffing against.
type baseline struct {
	inst     map[int64][]byte // instance id → its JSON
	order    []int64          // the instances' ids in order
	ledger   []LedgerEntry
	logs     map[string]string
	logOrder []string
	creates  map[int64]int
	sshKeys  []byte // JSON
}

// body is the part of a state that a journal line carries as changes; the
// rest of the state (its scalars) each line carries whole.
type body struct {
	Instances []*instance
	Ledger    []LedgerEntry
	Logs      map[string]string
	LogOrder  []string
	Creates   map[int64]int
	SSHKeys   []sshKey
}

func (s *state) body() body {
	return body{s.Instances, s.Ledger, s.Logs, s.LogOrder, s.Creates, s.SSHKeys}
}

func (s *state) setBody(b body) {
	s.Instances, s.Ledger, s.Logs, s.LogOrder, s.Creates, s.SSHKeys = b.Instances, b.Ledger, b.Logs, b.LogOrder, b.Creates, b.SSHKeys
}

// journalHeader is a journal's first line.
type journalHeader struct {
	Gen int64 `json:"gen"` // the snapshot generation the journal follows
}

// delta is one journal line: the state after a save, as changes to the
// state after the save before.
type delta struct {
	// State is the state without its body: every scalar, whole.
	State json.RawMessage `json:"state"`
	// Instances are the new and changed instances, whole, in order; Order
	// lists every instance's id when the order is not the old one with the
	// new instances after it (one was removed or moved).
	Instances []json.RawMessage `json:"instances,omitempty"`
	Order     *[]int64          `json:"order,omitempty"`
	// LedgerExt are entries that only grew (To and Amount), grouped by
	// their new To; LedgerSet are entries otherwise changed. Then, from
	// LedgerFrom on, Ledger replaces the ledger's tail: the new entries,
	// or the whole ledger when it shrank.
	LedgerExt  []ledgerExt        `json:"ledger_ext,omitempty"`
	LedgerSet  []ledgerAt         `json:"ledger_set,omitempty"`
	LedgerFrom *int               `json:"ledger_from,omitempty"`
	Ledger     []LedgerEntry      `json:"ledger,omitempty"`
	Logs       map[string]*string `json:"logs,omitempty"` // null: evicted
	// LogOrder loses LogDrop tokens from its front and gains LogAdd.
	LogDrop int             `json:"log_drop,omitempty"`
	LogAdd  []string        `json:"log_add,omitempty"`
	Creates map[int64]*int  `json:"creates,omitempty"`  // null: removed
	SSHKeys json.RawMessage `json:"ssh_keys,omitempty"` // whole, when changed
}

type ledgerExt struct {
	To     json.RawMessage `json:"to"`
	Index  []int           `json:"i"`
	Amount []float64       `json:"amount"`
}

type ledgerAt struct {
	Index int         `json:"i"`
	Entry LedgerEntry `json:"entry"`
}

// loadState reads the market saved in dir: its snapshot, then the journal
// lines that follow it. It is nil when dir holds no market.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("sim: reading %s: %w", stateFile, err)
	}
	if st.Version != 1 {
		return nil, fmt.Errorf("sim: %s has version %d, want 1", stateFile, st.Version)
	}
	if err := replay(filepath.Join(dir, journalFile), st); err != nil {
		return nil, err
	}
	return st, nil
}

// replay applies the journal at path to st, the snapshot it follows. A
// final line without its newline is an append a crash cut short, and is
// ignored; any other line that cannot be applied is an error.
func replay(path string, st *state) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	bad := func(n int, err error) error {
		return fmt.Errorf("sim: %s line %d: %w", filepath.Base(path), n, err)
	}
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil // torn: the save it held never returned
		}
		line := data[:i]
		data = data[i+1:]
		if n == 1 {
			var h journalHeader
			if err := json.Unmarshal(line, &h); err != nil {
				return bad(n, err)
			}
			if h.Gen < st.Gen {
				return nil // written before the snapshot, which holds it all
			}
			if h.Gen > st.Gen {
				return bad(n, fmt.Errorf("follows snapshot generation %d, but %s is generation %d", h.Gen, stateFile, st.Gen))
			}
			continue
		}
		var d delta
		if err := json.Unmarshal(line, &d); err != nil {
			return bad(n, err)
		}
		if err := d.apply(st); err != nil {
			return bad(n, err)
		}
	}
	return nil
}

// apply changes st as the save that wrote d changed it.
func (d *delta) apply(st *state) error {
	b := st.body()
	*st = state{}
	if err := json.Unmarshal(d.State, st); err != nil {
		return err
	}
	if b.Logs == nil {
		b.Logs = map[string]string{}
	}
	if b.Creates == nil {
		b.Creates = map[int64]int{}
	}

	at := make(map[int64]int, len(b.Instances))
	for i, in := range b.Instances {
		at[in.ID] = i
	}
	for _, raw := range d.Instances {
		in := &instance{}
		if err := json.Unmarshal(raw, in); err != nil {
			return err
		}
		if i, ok := at[in.ID]; ok {
			b.Instances[i] = in
		} else {
			at[in.ID] = len(b.Instances)
			b.Instances = append(b.Instances, in)
		}
	}
	if d.Order != nil {
		var ordered []*instance
		for _, id := range *d.Order {
			i, ok := at[id]
			if !ok {
				return fmt.Errorf("order names instance %d, which is not there", id)
			}
			ordered = append(ordered, b.Instances[i])
		}
		b.Instances = ordered
	}

	for _, x := range d.LedgerExt {
		if len(x.Index) != len(x.Amount) {
			return fmt.Errorf("ledger_ext: %d indexes, %d amounts", len(x.Index), len(x.Amount))
		}
		var to time.Time
		if err := json.Unmarshal(x.To, &to); err != nil {
			return err
		}
		for k, i := range x.Index {
			if i < 0 || i >= len(b.Ledger) {
				return fmt.Errorf("ledger_ext: no entry %d in a ledger of %d", i, len(b.Ledger))
			}
			b.Ledger[i].To, b.Ledger[i].Amount = to, x.Amount[k]
		}
	}
	for _, x := range d.LedgerSet {
		if x.Index < 0 || x.Index >= len(b.Ledger) {
			return fmt.Errorf("ledger_set: no entry %d in a ledger of %d", x.Index, len(b.Ledger))
		}
		b.Ledger[x.Index] = x.Entry
	}
	if d.LedgerFrom != nil {
		if *d.LedgerFrom < 0 || *d.LedgerFrom > len(b.Ledger) {
			return fmt.Errorf("ledger_from %d past a ledger of %d", *d.LedgerFrom, len(b.Ledger))
		}
		b.Ledger = append(b.Ledger[:*d.LedgerFrom], d.Ledger...)
		if len(b.Ledger) == 0 {
			b.Ledger = nil // as it was saved: an empty tail is not written
		}
	}

	applyMapDelta(b.Logs, d.Logs)
	if d.LogDrop > len(b.LogOrder) {
		return fmt.Errorf("log_drop %d past %d logs", d.LogDrop, len(b.LogOrder))
	}
	if d.LogDrop > 0 || len(d.LogAdd) > 0 {
		b.LogOrder = append(b.LogOrder[d.LogDrop:len(b.LogOrder):len(b.LogOrder)], d.LogAdd...)
		if len(b.LogOrder) == 0 {
			b.LogOrder = nil
		}
	}
	applyMapDelta(b.Creates, d.Creates)
	if d.SSHKeys != nil {
		b.SSHKeys = nil
		if err := json.Unmarshal(d.SSHKeys, &b.SSHKeys); err != nil {
			return err
		}
	}
	st.setBody(b)
	return nil
}

// persistLocked writes the state: one journal line, or, when the journal
// has grown enough (or is not open, or the market closes), a compaction.
func (m *Market) persistLocked() error {
	j := &m.jr
	if j.f == nil || j.compact {
		return m.compactLocked()
	}
	line, commit, err := m.diffLocked()
	if err != nil {
		return err
	}
	if j.size+int64(len(line)) > j.limit {
		return m.compactLocked()
	}
	_, err = j.f.Write(line)
	j.cost.written += int64(len(line))
	if err == nil {
		j.cost.syncs++
		err = j.f.Sync()
	}
	if err != nil {
		// The journal may end in part of this line: the next save
		// compacts rather than append after it.
		j.close()
		return fmt.Errorf("appending to %s: %w", journalFile, err)
	}
	j.size += int64(len(line))
	j.cost.lines++
	j.cost.lineBytes += int64(len(line))
	commit()
	return nil
}

// compactLocked writes a snapshot of the next generation and starts an
// empty journal that follows it.
func (m *Market) compactLocked() error {
	j := &m.jr
	j.close()
	j.cost.snapshots++
	// A generation is never reused, even when its snapshot failed to be
	// written: its journal may have been.
	m.st.Gen++
	snap, err := json.Marshal(m.st)
	if err != nil {
		return err
	}
	j.cost.written += int64(len(snap))
	j.cost.syncs += 2 // the file, the directory
	if err := atomicfile.WriteFile(filepath.Join(m.dir, stateFile), snap, 0o600); err != nil {
		return err
	}
	hdr, err := json.Marshal(journalHeader{Gen: m.st.Gen})
	if err != nil {
		return err
	}
	hdr = append(hdr, '\n')
	path := filepath.Join(m.dir, journalFile)
	j.cost.written += int64(len(hdr))
	j.cost.syncs += 2
	// Atomically, so that a journal is never without its header, and its
	// directory entry is durable before anything is appended.
	if err := atomicfile.WriteFile(path, hdr, 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	j.f, j.size, j.compact = f, int64(len(hdr)), false
	j.limit = max(int64(len(snap)), journalMinBytes)
	j.base, err = newBaseline(m.st)
	if err != nil {
		j.close()
		return err
	}
	return nil
}

func (j *journal) close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
}

// removeJournal removes a journal that has no snapshot to follow.
func removeJournal(dir string) error {
	if err := os.Remove(filepath.Join(dir, journalFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func newBaseline(st *state) (baseline, error) {
	b := baseline{
		inst:     make(map[int64][]byte, len(st.Instances)),
		order:    make([]int64, len(st.Instances)),
		ledger:   slices.Clone(st.Ledger),
		logs:     maps.Clone(st.Logs),
		logOrder: slices.Clone(st.LogOrder),
		creates:  maps.Clone(st.Creates),
	}
	if b.logs == nil {
		b.logs = map[string]string{}
	}
	if b.creates == nil {
		b.creates = map[int64]int{}
	}
	for i, in := range st.Instances {
		raw, err := json.Marshal(in)
		if err != nil {
			return baseline{}, err
		}
		b.inst[in.ID], b.order[i] = raw, in.ID
	}
	var err error
	b.sshKeys, err = json.Marshal(st.SSHKeys)
	return b, err
}

// diffLocked is the journal line that takes the baseline to the state,
// and what makes the state the baseline once that line is written.
func (m *Market) diffLocked() (line []byte, commit func(), err error) {
	st, base := m.st, &m.jr.base
	var d delta
	var commits []func()

	c := *st
	c.setBody(body{})
	if d.State, err = json.Marshal(&c); err != nil {
		return nil, nil, err
	}

	// Instances: whole when their JSON changed.
	ids := make([]int64, len(st.Instances))
	changed := map[int64][]byte{}
	for i, in := range st.Instances {
		raw, err := json.Marshal(in)
		if err != nil {
			return nil, nil, err
		}
		ids[i] = in.ID
		if !bytes.Equal(base.inst[in.ID], raw) {
			d.Instances = append(d.Instances, raw)
			changed[in.ID] = raw
		}
	}
	if len(ids) < len(base.order) || !slices.Equal(ids[:len(base.order)], base.order) {
		d.Order = &ids
	}
	if len(changed) > 0 || len(ids) != len(base.order) || d.Order != nil {
		commits = append(commits, func() {
			maps.Copy(base.inst, changed)
			if d.Order != nil {
				keep := make(map[int64]bool, len(ids))
				for _, id := range ids {
					keep[id] = true
				}
				maps.DeleteFunc(base.inst, func(id int64, _ []byte) bool { return !keep[id] })
			}
			base.order = ids
		})
	}

	// The ledger: entries grow in place while their instance bills on, and
	// new ones are appended.
	old, cur := base.ledger, st.Ledger
	if len(cur) < len(old) {
		from := 0
		d.LedgerFrom, d.Ledger = &from, cur
		commits = append(commits, func() { base.ledger = slices.Clone(cur) })
	} else {
		var patched []int
		groups := map[string]int{} // To's JSON → its index in d.LedgerExt
		for i := range old {
			o, n := old[i], cur[i]
			if o == n {
				continue
			}
			patched = append(patched, i)
			if o.InstanceID != n.InstanceID || o.OfferID != n.OfferID || o.Kind != n.Kind || o.From != n.From {
				d.LedgerSet = append(d.LedgerSet, ledgerAt{i, n})
				continue
			}
			to, err := json.Marshal(n.To)
			if err != nil {
				return nil, nil, err
			}
			g, ok := groups[string(to)]
			if !ok {
				g = len(d.LedgerExt)
				groups[string(to)] = g
				d.LedgerExt = append(d.LedgerExt, ledgerExt{To: to})
			}
			d.LedgerExt[g].Index = append(d.LedgerExt[g].Index, i)
			d.LedgerExt[g].Amount = append(d.LedgerExt[g].Amount, n.Amount)
		}
		if len(cur) > len(old) {
			from := len(old)
			d.LedgerFrom, d.Ledger = &from, cur[from:]
		}
		if len(patched) > 0 || len(cur) > len(old) {
			commits = append(commits, func() {
				for _, i := range patched {
					base.ledger[i] = cur[i]
				}
				base.ledger = append(base.ledger, cur[len(old):]...)
			})
		}
	}

	// Logs, and their order: the oldest dropped, the newest appended.
	d.Logs = mapDelta(st.Logs, base.logs)
	if !slices.Equal(st.LogOrder, base.logOrder) {
		drop := len(base.logOrder)
		if len(st.LogOrder) > 0 {
			if k := slices.Index(base.logOrder, st.LogOrder[0]); k >= 0 && len(base.logOrder)-k <= len(st.LogOrder) &&
				slices.Equal(base.logOrder[k:], st.LogOrder[:len(base.logOrder)-k]) {
				drop = k
			}
		}
		d.LogDrop, d.LogAdd = drop, st.LogOrder[len(base.logOrder)-drop:]
	}
	if d.Logs != nil || d.LogDrop > 0 || len(d.LogAdd) > 0 {
		commits = append(commits, func() {
			applyMapDelta(base.logs, d.Logs)
			base.logOrder = slices.Clone(st.LogOrder)
		})
	}

	d.Creates = mapDelta(st.Creates, base.creates)
	if d.Creates != nil {
		commits = append(commits, func() { applyMapDelta(base.creates, d.Creates) })
	}

	keys, err := json.Marshal(st.SSHKeys)
	if err != nil {
		return nil, nil, err
	}
	if !bytes.Equal(keys, base.sshKeys) {
		d.SSHKeys = keys
		commits = append(commits, func() { base.sshKeys = keys })
	}

	line, err = json.Marshal(&d)
	if err != nil {
		return nil, nil, err
	}
	return append(line, '\n'), func() {
		for _, c := range commits {
			c()
		}
	}, nil
}

// mapDelta is what changed from base to cur: the new value of each key added
// or changed, null for each key removed; nil when nothing changed.
func mapDelta[K, V comparable](cur, base map[K]V) map[K]*V {
	var d map[K]*V
	for k, v := range cur {
		if ov, ok := base[k]; !ok || ov != v {
			if d == nil {
				d = map[K]*V{}
			}
			d[k] = &v
		}
	}
	for k := range base {
		if _, ok := cur[k]; !ok {
			if d == nil {
				d = map[K]*V{}
			}
			d[k] = nil
		}
	}
	return d
}

// applyMapDelta makes m what mapDelta was taken to: each key set to its new
// value, or removed where that is null.
func applyMapDelta[K comparable, V any](m map[K]V, d map[K]*V) {
	for k, v := range d {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = *v
		}
	}
}
