package sim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Lying hosts (Faults.Liars). A vast host's operator can read everything
// its containers hold and send anything from them. On a lying machine
// (drawn per machine, so every instance it hosts lies) the simulator plays
// that operator, using only what a real one can reach: it finds the
// vastfleet agent's credential on the container's disk and, with it, speaks
// for the node over the network:
//   - it leases items in the node's name and returns wrong results for
//     them (the node's results are wrong, always);
//   - it posts findings the run never made;
//   - it posts results for items the node never leased;
//   - it sends heartbeats in another node's name.
//
// The coordinator must refuse the last two, and catch the first two by
// validation (validate, spot_checks, verify). Flaky hardware, wrong 1% of
// the time, is exercised by the coordinator's own campaign
// (coord.TestLiarCampaign), not here.
//
// The attacks run in wall time, as a real host's would, every liarEvery.
const liarEvery = time.Second

// LiarTally counts what lying hosts tried and what the coordinator did
// with it, by attack.
type LiarTally struct {
	Tried    map[string]int `json:"tried"`
	Accepted map[string]int `json:"accepted"` // answered 2xx
}

// Attack names in a LiarTally.
const (
	AttackWrongResult   = "wrong_result"
	AttackForgedFinding = "forged_finding"
	AttackUnleased      = "unleased_result"
	AttackOtherNode     = "other_node_heartbeat"
)

// liars runs the lying operators of booted instances.
type liars struct {
	mu     sync.Mutex
	cancel map[int64]context.CancelFunc
	wg     sync.WaitGroup
	tally  LiarTally
}

// lies reports whether in's machine is run by a liar.
func (m *Market) lies(in *instance) bool {
	share := m.cfg.Faults.Liars
	if share <= 0 {
		return false
	}
	o := &m.offers[m.byID[in.OfferID]]
	return draw(m.st.Seed, drawLiar, o.MachineID, 0) < share
}

// LyingMachines lists the machines whose operators lie, among those this
// market has rented out so far.
func (m *Market) LyingMachines() []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[int64]bool{}
	var out []int64
	for _, in := range m.st.Instances {
		o := &m.offers[m.byID[in.OfferID]]
		if !seen[o.MachineID] && m.lies(in) {
			seen[o.MachineID] = true
			out = append(out, o.MachineID)
		}
	}
	return out
}

// Liars is what lying hosts have tried so far.
func (m *Market) Liars() LiarTally {
	l := &m.liars
	l.mu.Lock()
	defer l.mu.Unlock()
	out := LiarTally{Tried: map[string]int{}, Accepted: map[string]int{}}
	for k, v := range l.tally.Tried {
		out.Tried[k] = v
	}
	for k, v := range l.tally.Accepted {
		out.Accepted[k] = v
	}
	return out
}

// startLiar starts the operator of a booted instance on a lying machine.
func (m *Market) startLiar(in *instance, dir string) {
	l := &m.liars
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel == nil {
		l.cancel = map[int64]context.CancelFunc{}
	}
	if _, ok := l.cancel[in.ID]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel[in.ID] = cancel
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		op := &operator{dir: dir, id: in.ID, tally: l.count}
		op.run(ctx)
	}()
}

// stopLiar stops an instance's operator: the instance stopped or went.
func (m *Market) stopLiar(id int64) {
	l := &m.liars
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.cancel[id]; ok {
		c()
		delete(l.cancel, id)
	}
}

// closeLiars stops every operator and waits for them.
func (m *Market) closeLiars() {
	l := &m.liars
	l.mu.Lock()
	for id, c := range l.cancel {
		c()
		delete(l.cancel, id)
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *liars) count(attack string, accepted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tally.Tried == nil {
		l.tally.Tried, l.tally.Accepted = map[string]int{}, map[string]int{}
	}
	l.tally.Tried[attack]++
	if accepted {
		l.tally.Accepted[attack]++
	}
}

// operator is a lying host's operator for one instance.
type operator struct {
	dir   string
	id    int64
	tally func(attack string, accepted bool)
	cred  *agentCredential
	n     int
}

// agentCredential is the agent's credential file as it lies on the
// container's disk: read the way a host would, by its contents.
type agentCredential struct {
	Coord string `json:"coord"`
	Fleet string `json:"fleet"`
	Node  string `json:"node"`
	Token string `json:"token"`
}

// client: the operator ignores the coordinator's certificate pin, which
// binds only honest agents.
var liarClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
}

func (op *operator) run(ctx context.Context) {
	t := time.NewTicker(liarEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if op.cred == nil {
			op.cred = findCredential(op.dir)
			continue
		}
		op.attack(ctx)
	}
}

// findCredential looks through the container's disk for the agent's
// credential, a few levels deep.
func findCredential(dir string) *agentCredential {
	var found *agentCredential
	root := strings.Count(dir, string(filepath.Separator))
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || found != nil {
			return filepath.SkipDir
		}
		if d.IsDir() {
			if strings.Count(p, string(filepath.Separator))-root > 4 {
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() != "credential.json" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var c agentCredential
		if json.Unmarshal(b, &c) == nil && c.Token != "" && c.Coord != "" {
			found = &c
			return filepath.SkipAll
		}
		return nil
	})
	return found
}

// attack makes one round of every attack.
func (op *operator) attack(ctx context.Context) {
	c := op.cred
	op.n++
	// A wrong result for an item leased in the node's name.
	var lease struct {
		Item *struct {
			ID int64 `json:"id"`
		} `json:"item"`
		Lease string `json:"lease"`
	}
	if code := op.post(ctx, "/api/v1/items/lease", map[string]any{"fleet": c.Fleet, "node": c.Node, "session": "work"}, &lease); code == 200 && lease.Item != nil {
		code := op.post(ctx, "/api/v1/items/result", op.wrongResult(lease.Item.ID, lease.Lease), nil)
		op.tally(AttackWrongResult, code/100 == 2)
	}
	// A result for an item this node never leased.
	code := op.post(ctx, "/api/v1/items/result", op.wrongResult(int64(1+op.n%50), "1"), nil)
	op.tally(AttackUnleased, code/100 == 2)
	// A finding the run never made.
	finding := map[string]any{"fleet": c.Fleet, "node": c.Node, "items": []map[string]any{{
		"key": fmt.Sprintf("forged-%d-%d", op.id, op.n), "at": time.Now().UTC(), "data": map[string]any{"found": randomHex(8)},
	}}}
	code = op.post(ctx, "/api/v1/findings", finding, nil)
	op.tally(AttackForgedFinding, code/100 == 2)
	// A heartbeat in another node's name, to keep its leases alive.
	other := "node-0"
	if c.Node == other {
		other = "node-1"
	}
	code = op.post(ctx, "/api/v1/heartbeat", map[string]any{"fleet": c.Fleet, "node": other, "seq": op.n, "sent_at": time.Now().UTC()}, nil)
	op.tally(AttackOtherNode, code/100 == 2)
}

// wrongResult is a successful-looking result whose output is made up.
func (op *operator) wrongResult(item int64, lease string) map[string]any {
	return map[string]any{
		"fleet": op.cred.Fleet, "node": op.cred.Node, "session": "work", "id": item, "lease": lease,
		"exit_code": 0, "stdout_tail": randomHex(8) + "\n", "at": time.Now().UTC(),
		"outputs": []map[string]any{{"path": "result", "bytes": 32, "sha256": randomHex(32)}},
	}
}

// post sends body to the coordinator with the node's credential and
// returns the status (0 when no answer came).
func (op *operator) post(ctx context.Context, path string, body, out any) int {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimRight(op.cred.Coord, "/")+path, bytes.NewReader(b))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+op.cred.Token)
	resp, err := liarClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode == 200 {
		json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
	} else {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	}
	return resp.StatusCode
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
