package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// jobRecordOn reads the one job record in a data dir, if there is one yet.
func jobRecordOn(dataDir string) (id, state string) {
	ents, _ := os.ReadDir(filepath.Join(dataDir, "jobs"))
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dataDir, "jobs", e.Name(), "job.json"))
		if err != nil {
			continue
		}
		var rec struct {
			ID        string `json:"id"`
			State     string `json:"state"`
			Dashboard string `json:"dashboard"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Dashboard != "" {
			return rec.ID, rec.State
		}
	}
	return "", ""
}

// TestUpKill9ThenResume: up runs a 40-item job on 3 simulated nodes and
// is killed with SIGKILL mid-launch and mid-run, at a random moment of
// each phase (up to 1 s into it; the seed is logged). Afterwards no
// instance exists in the marketplace that the store does not know, and
// up --resume JOB finishes the job: every item recorded exactly once,
// nothing left running. One kill per phase in CI; a longer campaign:
//
//	VASTFLEET_KILL_UP_RUNS=10 go test ./cmd/vastfleet -run TestUpKill9ThenResume -v -timeout 60m
func TestUpKill9ThenResume(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs fleets")
	}
	needOnstartTools(t)
	bin := binary(t)
	runs := 1
	if n, err := strconv.Atoi(os.Getenv("VASTFLEET_KILL_UP_RUNS")); err == nil && n > 0 {
		runs = n
	}
	seed := time.Now().UnixNano()
	t.Logf("kill points drawn with seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for i := 0; i < 2*runs; i++ {
		at := []string{"launching", "running"}[i%2]
		into := time.Duration(rng.Int64N(int64(time.Second)))
		t.Run(fmt.Sprintf("mid-%s-%d", at, i/2), func(t *testing.T) {
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			stopMarketAtCleanup(t, data)
			file := filepath.Join(dir, "job.yaml")
			os.WriteFile(file, []byte(`name: k9
query: "rentable=True num_gpus=1 dph_total<1"
count: 3
image: ubuntu:22.04
items: 0..39
run: sleep 0.2; echo "item {item} done"
`), 0o644)
			vf := func(args ...string) []string {
				return append([]string{"--data-dir", data, "--sim-faults", "none", "--sim-speed", "120"}, args...)
			}
			up := exec.Command(bin, vf("up", file, "--results", filepath.Join(dir, "out"))...)
			var out strings.Builder
			up.Stdout, up.Stderr = &out, &out
			if err := up.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan struct{})
			go func() { up.Wait(); close(exited) }()
			var job string
			eventually(t, "up to reach "+at, 2*time.Minute, func() bool {
				id, state := jobRecordOn(data)
				job = id
				select {
				case <-exited:
					t.Fatalf("up ended before it was killed:\n%s", out.String())
				default:
				}
				return state == at
			})
			select {
			case <-time.After(into):
			case <-exited:
			}
			if _, state := jobRecordOn(data); state != at {
				t.Skipf("the phase %s ended within %v; nothing to kill in it", at, into)
			}
			t.Logf("SIGKILL %v into %s", into, at)
			up.Process.Kill()
			<-exited
			// Should the test fail, the nodes (and their processes) still go.
			t.Cleanup(func() { exec.Command(bin, vf("down", job, "--no-collect")...).Run() })

			rec, err := exec.Command(bin, vf("reconcile", "--json")...).Output()
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			var rc struct {
				Orphans []json.RawMessage `json:"orphans"`
			}
			if err := json.Unmarshal(rec, &rc); err != nil || len(rc.Orphans) != 0 {
				t.Fatalf("after kill -9 %s: instances the store does not know: %s (%v)", at, rec, err)
			}

			st, err := exec.Command(bin, vf("status", job, "--json")...).Output()
			var rows []struct {
				State string `json:"state"`
				Up    bool   `json:"up_running"`
			}
			if err != nil || json.Unmarshal(st, &rows) != nil || len(rows) != 1 || rows[0].State != at || rows[0].Up {
				t.Fatalf("status after kill -9: %s (%v)", st, err)
			}
			res := exec.Command(bin, vf("up", "--resume", job, "--json")...)
			var stderr strings.Builder
			res.Stderr = &stderr
			b, err := res.Output()
			if err != nil {
				t.Fatalf("up --resume %s: %v\n%s\nstderr:\n%s\nfirst up:\n%s", job, err, b, stderr.String(), out.String())
			}
			var rep struct {
				ItemsDone int `json:"items_done"`
				ItemsLeft int `json:"items_left"`
				Live      int `json:"instances_live"`
			}
			if err := json.Unmarshal(b, &rep); err != nil || rep.ItemsDone != 40 || rep.ItemsLeft != 0 || rep.Live != 0 {
				t.Fatalf("up --resume: %s (%v)\nstderr:\n%s", b, err, stderr.String())
			}
			fh, err := os.Open(filepath.Join(dir, "out", job, "items.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			seen := map[string]int{}
			for sc := bufio.NewScanner(fh); sc.Scan(); {
				var it struct {
					Value string `json:"value"`
				}
				json.Unmarshal(sc.Bytes(), &it)
				seen[it.Value]++
			}
			for i := 0; i < 40; i++ {
				if n := seen[fmt.Sprint(i)]; n != 1 {
					t.Errorf("item %d recorded %d times, want once", i, n)
				}
			}
			ls, _ := exec.Command(bin, vf("ls", "--json")...).Output()
			if strings.Contains(string(ls), `"running"`) {
				t.Errorf("instances left after resume: %s", ls)
			}
		})
	}
}

// TestUpKill9ThenDown: up is killed with SIGKILL while its job runs; down
// JOB then writes items.jsonl (and findings.jsonl) from the coordinator's
// database and reports the real counts, as a clean finish does, and
// leaves nothing running.
func TestUpKill9ThenDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs fleets")
	}
	needOnstartTools(t)
	bin := binary(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	stopMarketAtCleanup(t, data)
	file := filepath.Join(dir, "job.yaml")
	os.MkdirAll(filepath.Join(dir, "work"), 0o755)
	// An item takes two seconds of this machine's time and reports a
	// finding: the kill comes with items both done and left.
	os.WriteFile(filepath.Join(dir, "work", "item.sh"), []byte(`sleep 2
echo "{\"found\":{\"item\":\"$1\"}}"
`), 0o644)
	os.WriteFile(file, []byte(`name: k9d
query: "rentable=True num_gpus=1 dph_total<1"
count: 2
image: ubuntu:22.04
workdir: work
items: 0..19
run: sh item.sh {item}
`), 0o644)
	vf := func(args ...string) []string {
		return append([]string{"--data-dir", data, "--sim-faults", "none", "--sim-speed", "120"}, args...)
	}
	up := exec.Command(bin, vf("up", file, "--results", filepath.Join(dir, "out"))...)
	out := &lockedBuffer{}
	up.Stdout, up.Stderr = out, out
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { up.Wait(); close(exited) }()
	var job string
	// Killed once up's progress line shows items done (in coord.db).
	someDone := regexp.MustCompile(`items [1-9][0-9]*/20 `)
	eventually(t, "an item done", 3*time.Minute, func() bool {
		select {
		case <-exited:
			t.Fatalf("up ended before it was killed:\n%s", out.String())
		default:
		}
		job, _ = jobRecordOn(data)
		return someDone.MatchString(out.String())
	})
	up.Process.Kill()
	<-exited
	t.Cleanup(func() { exec.Command(bin, vf("down", job, "--no-collect")...).Run() })

	res := exec.Command(bin, vf("down", job, "--json")...)
	var stderr strings.Builder
	res.Stderr = &stderr
	b, err := res.Output()
	if err != nil {
		t.Fatalf("down %s: %v\n%s\nstderr:\n%s", job, err, b, stderr.String())
	}
	var rep struct {
		Findings  int `json:"findings"`
		ItemsDone int `json:"items_done"`
		Live      int `json:"instances_live"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Live != 0 {
		t.Fatalf("down: %s (%v)\nstderr:\n%s", b, err, stderr.String())
	}
	items, _ := os.ReadFile(filepath.Join(dir, "out", job, "items.jsonl"))
	finds, _ := os.ReadFile(filepath.Join(dir, "out", job, "findings.jsonl"))
	if rep.ItemsDone == 0 || rep.Findings == 0 || strings.Count(string(items), "\n") != rep.ItemsDone || strings.Count(string(finds), "\n") != rep.Findings {
		t.Errorf("report: %d items done, %d findings; items.jsonl %d lines, findings.jsonl %d lines\nstderr:\n%s",
			rep.ItemsDone, rep.Findings, strings.Count(string(items), "\n"), strings.Count(string(finds), "\n"), stderr.String())
	}
}

// lockedBuffer is a process's output, read while it is written.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
