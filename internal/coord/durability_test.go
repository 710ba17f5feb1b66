package coord

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/atomicfile"
	"github.com/vastfleet/vastfleet/internal/certpin"
	"github.com/vastfleet/vastfleet/internal/wire"
)

const (
	childDBEnv   = "VASTFLEET_COORD_TEST_CHILD_DB"
	childAddrEnv = "VASTFLEET_COORD_TEST_CHILD_ADDR"
)

// TestCoordinatorChildProcess is the coordinator the kill -9 test runs in
// a process of its own; run directly it does nothing.
func TestCoordinatorChildProcess(t *testing.T) {
	t.Parallel()
	dbPath := os.Getenv(childDBEnv)
	if dbPath == "" {
		t.Skip("only run as the child of TestFindingsSurviveKill9")
	}
	db, err := OpenDB(context.Background(), dbPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Config{DB: db, TokenRate: 1e6, Members: testMembers{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteFile(os.Getenv(childAddrEnv), []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = http.Serve(ln, srv.Handler()) // until the parent kills this process
}

// enrollHTTP trades the bootstrap token for instance id's credential.
func enrollHTTP(c *http.Client, url, bootstrap string, id int64, node string) (string, error) {
	b, _ := json.Marshal(wire.EnrollRequest{Fleet: "alpha", InstanceID: id, Node: node})
	req, _ := http.NewRequest("POST", url+wire.PathEnroll, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+bootstrap)
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var rep wire.EnrollReply
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&rep) != nil {
		return "", fmt.Errorf("enroll %s: status %d", node, resp.StatusCode)
	}
	return rep.Token, nil
}

// postFindings sends one batch and says whether it was acknowledged.
func postFindings(ctx context.Context, c *http.Client, url, token string, fs wire.Findings) (bool, error) {
	b, _ := json.Marshal(fs)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+wire.PathFindings, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var ack wire.FindingsAck
	if resp.StatusCode != 200 {
		return false, fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&ack); err != nil {
		return false, err
	}
	return len(ack.Acked) == len(fs.Items), nil
}

func storedKeys(t *testing.T, db *DB, fleet string) map[string]bool {
	t.Helper()
	fs, err := db.Findings(context.Background(), fleet, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fs {
		if out[f.Key] {
			t.Fatalf("key %s stored twice", f.Key)
		}
		out[f.Key] = true
	}
	return out
}

func TestFindingsSurviveKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	dbPath, addrPath := filepath.Join(dir, "coord.db"), filepath.Join(dir, "addr")
	db := openTestDB(t, dbPath)
	agent, _, err := db.FleetTokens(context.Background(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestCoordinatorChildProcess$")
	cmd.Env = append(os.Environ(), childDBEnv+"="+dbPath, childAddrEnv+"="+addrPath)
	var childOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &childOut, &childOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var addr string
	for deadline := time.Now().Add(60 * time.Second); addr == ""; {
		if b, err := os.ReadFile(addrPath); err == nil {
			addr = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child coordinator did not start: %s", childOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	url := "http://" + addr

	var (
		mu          sync.Mutex
		sent, acked = map[string]bool{}, map[string]bool{}
		ackedN      atomic.Int64
		wg          sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second}
	creds := make([]string, 4)
	for w := range creds {
		if creds[w], err = enrollHTTP(client, url, agent, int64(w+1), fmt.Sprintf("n%d", w)); err != nil {
			t.Fatal(err)
		}
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				fs := wire.Findings{Fleet: "alpha", Node: fmt.Sprintf("n%d", w)}
				for j := range 5 {
					k := fmt.Sprintf("w%d-b%d-i%d", w, i, j)
					fs.Items = append(fs.Items, wire.Finding{Key: k, Data: json.RawMessage(`{"x":1}`)})
				}
				mu.Lock()
				for _, it := range fs.Items {
					sent[it.Key] = true
				}
				mu.Unlock()
				ok, err := postFindings(ctx, client, url, creds[w], fs)
				if err != nil {
					return // the coordinator is gone
				}
				if ok {
					mu.Lock()
					for _, it := range fs.Items {
						acked[it.Key] = true
					}
					mu.Unlock()
					ackedN.Add(1)
				}
			}
		}()
	}
	// Kill while batches are in flight, after some have been acked.
	for ackedN.Load() < 60 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	killed = true
	cmd.Wait()
	wg.Wait()

	db = openTestDB(t, dbPath)
	defer db.Close()
	stored := storedKeys(t, db, "alpha")
	for k := range acked {
		if !stored[k] {
			t.Fatalf("acked finding %s was lost", k)
		}
	}
	for k := range stored {
		if !sent[k] {
			t.Fatalf("stored %s that nobody sent", k)
		}
	}
	t.Logf("at the kill: %d sent, %d acked, %d stored", len(sent), len(acked), len(stored))

	// Restart: the agents send everything again, as their spools hold
	// whatever was not acked (and some that was, for good measure).
	srv, err := New(Config{DB: db, TokenRate: 1e6, Members: testMembers{}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	replay, err := enrollHTTP(hs.Client(), hs.URL, agent, 99, "replay")
	if err != nil {
		t.Fatal(err)
	}
	var batch []wire.Finding
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ok, err := postFindings(ctx, hs.Client(), hs.URL, replay, wire.Findings{Fleet: "alpha", Node: "replay", Items: batch})
		if err != nil || !ok {
			t.Fatalf("replay: ok %v err %v", ok, err)
		}
		batch = nil
	}
	for k := range sent {
		batch = append(batch, wire.Finding{Key: k, Data: json.RawMessage(`{"x":1}`)})
		if len(batch) == 500 {
			flush()
		}
	}
	flush()
	stored = storedKeys(t, db, "alpha")
	if len(stored) != len(sent) {
		t.Fatalf("after the replay %d stored, %d sent", len(stored), len(sent))
	}
	if rows, distinct := countRows(t, db, "alpha"); rows != int64(len(sent)) || distinct != rows {
		t.Fatalf("%d rows, %d distinct, %d sent", rows, distinct, len(sent))
	}
}

// readEvent reads one server-sent event's data as a snapshot (a delta's
// totals read the same).
func readEvent(t *testing.T, rd *bufio.Reader) wire.Snapshot {
	t.Helper()
	_, data := readNamedEvent(t, rd)
	var s wire.Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("event data: %v", err)
	}
	return s
}

func TestEventsStreamSnapshotsAndDropAStalledSubscriber(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.PushEvery = 20 * time.Millisecond; c.TokenRate = 1e6 })

	// A reading subscriber sees the fleet change.
	req, _ := http.NewRequest("GET", r.http.URL+wire.PathEvents, nil)
	req.Header.Set("Authorization", "Bearer "+r.viewer)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	rd := bufio.NewReader(resp.Body)
	if s := readEvent(t, rd); s.Totals.NodesAlive != 0 {
		t.Fatalf("first snapshot: %+v", s.Totals)
	}
	r.do("POST", wire.PathHeartbeat, r.node("n1"), heartbeat("alpha", "n1"), nil)
	for i := 0; ; i++ {
		if s := readEvent(t, rd); s.Totals.NodesAlive == 1 && s.Totals.Metrics["keys_per_s"] == 1000 {
			break
		}
		if i > 500 {
			t.Fatal("the heartbeat never showed in the stream")
		}
	}
	resp.Body.Close()

	// A subscriber that never reads: big snapshots fill its socket, then
	// its buffer, and it is dropped, while heartbeats keep being answered.
	conn, err := net.Dial("tcp", r.http.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", wire.PathEvents, r.viewer)
	metrics := map[string]float64{}
	for i := range 100 {
		metrics[fmt.Sprintf("metric_with_a_long_name_%03d", i)] = float64(i)
	}
	for deadline := time.Now().Add(30 * time.Second); r.srv.Subscribers("alpha") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the stalled subscriber never subscribed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	beats := 0
	for deadline := time.Now().Add(60 * time.Second); r.srv.Subscribers("alpha") > 0; beats++ {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled subscriber was never dropped (%d heartbeats)", beats)
		}
		hb := heartbeat("alpha", fmt.Sprintf("node-%04d", beats%400))
		hb.Metrics = metrics
		if code, _ := r.do("POST", wire.PathHeartbeat, r.node(hb.Node), hb, nil); code != 200 {
			t.Fatalf("heartbeat %d while a subscriber stalls: %d", beats, code)
		}
	}
	t.Logf("stalled subscriber dropped after %d heartbeats", beats)

	// The stream still serves a new subscriber.
	resp, err = r.http.Client().Do(req.Clone(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if s := readEvent(t, bufio.NewReader(resp.Body)); s.Totals.NodesAlive < 2 {
		t.Fatalf("after the drop: %+v", s.Totals)
	}
}

func TestSelfSignedCertificateIsReusedAndPinnable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, fp, err := SelfSigned(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, fp2, err := SelfSigned(dir)
	if err != nil || fp2 != fp || len(fp) != 64 {
		t.Fatalf("second call: %v, fingerprint %q then %q", err, fp, fp2)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", err, st.Mode())
	}
	r := newRig(t, nil)
	hs := httptest.NewUnstartedServer(r.srv.Handler())
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hs.StartTLS()
	defer hs.Close()
	pinned := func(pin string) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, // the pin below replaces CA and name checks
			VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
				if len(raw) == 0 || certpin.Of(raw[0]) != pin {
					return errors.New("certificate does not match the pin")
				}
				return nil
			},
		}}}
	}
	body, _ := json.Marshal(heartbeat("alpha", "n1"))
	n1 := r.node("n1")
	post := func(c *http.Client) (int, error) {
		req, _ := http.NewRequest("POST", hs.URL+wire.PathHeartbeat, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+n1)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(pinned(fp)); err != nil || code != 200 {
		t.Fatalf("pinned heartbeat: %d %v", code, err)
	}
	if _, err := post(pinned(strings.Repeat("0", 64))); err == nil {
		t.Fatal("a wrong pin was accepted")
	}
}

// readNamedEvent reads one server-sent event: its name and data.
func readNamedEvent(t *testing.T, rd *bufio.Reader) (string, []byte) {
	t.Helper()
	var name, data string
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading events: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		if line == "" && data != "" {
			return name, []byte(data)
		}
		if n, ok := strings.CutPrefix(line, "event: "); ok {
			name = n
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			data += d
		}
	}
}

// After the first snapshot a dashboard is sent only the rows that changed:
// one heartbeat among 40 quiet nodes puts one row in the next delta, a
// tenth of the snapshot's size or less.
func TestEventsSendOnlyChangedRows(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.PushEvery = 20 * time.Millisecond; c.TokenRate = 1e6 })
	for i := range 40 {
		n := fmt.Sprintf("n%02d", i)
		r.do("POST", wire.PathHeartbeat, r.node(n), heartbeat("alpha", n), nil)
	}
	req, _ := http.NewRequest("GET", r.http.URL+wire.PathEvents, nil)
	req.Header.Set("Authorization", "Bearer "+r.viewer)
	resp, err := r.http.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	name, data := readNamedEvent(t, rd)
	var snap wire.Snapshot
	if err := json.Unmarshal(data, &snap); err != nil || name != "snapshot" || len(snap.Nodes) != 40 {
		t.Fatalf("first event %q: %d nodes, %v", name, len(snap.Nodes), err)
	}
	for name != "delta" { // the pushes' own baseline is in place
		name, _ = readNamedEvent(t, rd)
	}
	hb := heartbeat("alpha", "n07")
	hb.Seq, hb.Metrics = 2, map[string]float64{"keys_per_s": 2000}
	r.do("POST", wire.PathHeartbeat, r.node("n07"), hb, nil)
	for i := 0; ; i++ {
		if i > 500 {
			t.Fatal("the heartbeat never showed in a delta")
		}
		name, data := readNamedEvent(t, rd)
		if name != "delta" {
			continue // the periodic whole snapshot
		}
		var d struct {
			Totals  wire.Totals `json:"totals"`
			Nodes   []wire.Node `json:"nodes"`
			Removed []string    `json:"removed"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Nodes) == 0 {
			continue
		}
		if len(d.Nodes) != 1 || d.Nodes[0].Node != "n07" || d.Nodes[0].Metrics["keys_per_s"] != 2000 || d.Totals.NodesAlive != 40 {
			names := []string{}
			for _, n := range d.Nodes {
				names = append(names, n.Node)
			}
			t.Fatalf("delta rows %v, totals %+v: want only n07's", names, d.Totals)
		}
		if len(data) > len(snapBytes(t, snap))/10 {
			t.Errorf("a one-row delta is %d bytes, the snapshot %d", len(data), len(snapBytes(t, snap)))
		}
		return
	}
}

func snapBytes(t *testing.T, s wire.Snapshot) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAcknowledgedOnlyOnceDurable: with Config.Durable set (serve
// --replicate's wait for the replica), a findings batch is answered only
// after Durable returned, and not acknowledged when it failed; the batch
// sent again is acknowledged and stored once.
func TestAcknowledgedOnlyOnceDurable(t *testing.T) {
	t.Parallel()
	release := make(chan error)
	var calls atomic.Int64
	r := newRig(t, func(c *Config) {
		c.Durable = func(ctx context.Context) error {
			calls.Add(1)
			select {
			case err := <-release:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	tok := r.node("n1")
	type answer struct {
		code int
		ack  wire.FindingsAck
	}
	post := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			var a answer
			a.code, _ = r.do("POST", wire.PathFindings, tok, findings("alpha", "n1", "k1", "k2"), &a.ack)
			ch <- a
		}()
		return ch
	}
	first := post()
	// Committed, not yet durable: no answer.
	select {
	case a := <-first:
		t.Fatalf("answered before Durable returned: %+v", a)
	case <-time.After(300 * time.Millisecond):
	}
	release <- errors.New("replica unreachable")
	if a := <-first; a.code != http.StatusServiceUnavailable || len(a.ack.Acked) != 0 {
		t.Fatalf("Durable failed: HTTP %d, ack %+v; want 503 and nothing acknowledged", a.code, a.ack)
	}
	second := post()
	release <- nil
	if a := <-second; a.code != http.StatusOK || len(a.ack.Acked) != 2 {
		t.Fatalf("sent again, Durable ok: HTTP %d, ack %+v", a.code, a.ack)
	}
	if rows, distinct := countRows(t, r.db, "alpha"); rows != 2 || distinct != 2 {
		t.Errorf("stored %d rows (%d distinct), want each finding once", rows, distinct)
	}
	if calls.Load() != 2 {
		t.Errorf("Durable called %d times, want once per commit", calls.Load())
	}
}
