package launch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
)

func TestSummaryEventJSON(t *testing.T) {
	t.Parallel()
	s := &Summary{Asked: 300, Ready: 291, MinReady: 295, Replaced: 12, Failed: 14, Destroyed: 20, BootSpend: 1.5, DPHTotal: 80.25,
		VCPU: 20000, RAMGB: 69000, GPUs: 300, StoppedAtCap: "", Fleet: "x", Rented: 312, ReadyIDs: []int64{41, 42}, Clock: "market"}
	b, err := json.Marshal(Event{Event: EvSummary, At: time.Now(), Summary: s})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"asked", "boot_spend", "clock", "destroyed", "dph_total", "event", "failed", "fleet", "gpus", "interrupted", "min_ready", "ram_gb", "ready", "ready_ids", "rented", "replaced", "stopped_at_cap", "vcpu"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("summary keys (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(string(b), `{"event":"summary","asked":300,"ready":291,"min_ready":295,"replaced":12,"failed":14`) ||
		!strings.Contains(string(b), `"fleet":"x","ready_ids":[41,42],"rented":312`) {
		t.Errorf("summary line %s", b)
	}
	// Other events keep their own shape.
	b, _ = json.Marshal(Event{Event: EvRented, InstanceID: 7, OfferID: 9})
	if !strings.Contains(string(b), `"event":"rented"`) || !strings.Contains(string(b), `"instance_id":7`) {
		t.Errorf("event line %s", b)
	}
}

func TestParseEnvAndSessions(t *testing.T) {
	t.Parallel()
	env, err := ParseEnv("TCP_PORTS=8000;UDP_PORTS=; HF_TOKEN=a=b ;")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"TCP_PORTS": "8000", "UDP_PORTS": "", "HF_TOKEN": "a=b", "-p 8000:8000": "1"}, env); diff != "" {
		t.Error(diff)
	}
	if _, err := ParseEnv("NOVALUE"); err == nil {
		t.Error("KEY without = accepted")
	}
	se, err := ParseSession("train:python train.py --lr 'x'")
	if err != nil || se.Name != "train" || se.Command != "python train.py --lr 'x'" {
		t.Fatalf("%+v %v", se, err)
	}
	for _, bad := range []string{"nocolon", ":cmd", "bad name:cmd", "x:  "} {
		if _, err := ParseSession(bad); err == nil {
			t.Errorf("ParseSession(%q) accepted", bad)
		}
	}
	got := Onstart("apt-get update", []Session{{Name: "train", Command: "python t.py 'a'"}})
	if !strings.HasPrefix(got, "apt-get update\n") || !strings.Contains(got, "tmux new-session -d -s train") ||
		!strings.Contains(got, `'python t.py '\''a'\'''`) {
		t.Errorf("onstart:\n%s", got)
	}
	if Onstart("x", nil) != "x" {
		t.Error("onstart changed without sessions")
	}
	if again := Onstart(got, []Session{{Name: "train", Command: "python t.py 'a'"}}); again != got {
		t.Errorf("folding the sessions twice added them twice:\n%s", again)
	}
}

func TestSpecValidate(t *testing.T) {
	t.Parallel()
	good := baseSpec("ok", 10).WithDefaults()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Spec){
		"count 0":   func(s *Spec) { s.Count = 0 },
		"count 501": func(s *Spec) { s.Count = 501 },
		"bad fleet": func(s *Spec) { s.Fleet = "A B" },
		"interrupt": func(s *Spec) { s.OnInterrupt = "maybe" },
		"no image":  func(s *Spec) { s.Create.Image = "" },
		"dup sess":  func(s *Spec) { s.Sessions = []Session{{Name: "a", Command: "x"}, {Name: "a", Command: "y"}} },
	} {
		s := good
		mut(&s)
		if s.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if d := baseSpec("x", 10).WithDefaults(); d.MinReady != 10 || d.BootTimeout != DefaultBootTimeout || d.Workers != DefaultWorkers {
		t.Errorf("defaults %+v", d)
	}
}

func TestParseWaitForAndWait(t *testing.T) {
	t.Parallel()
	c, err := ParseWaitFor("vcpu>=5000 dph_per_vcpu<=0.002")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Term{{"vcpu", ">=", 5000}, {"dph_per_vcpu", "<=", 0.002}}, c.Terms); diff != "" {
		t.Error(diff)
	}
	for _, bad := range []string{"", "vcpu", "cpus>=3", "vcpu>=x", ">=3"} {
		if _, err := ParseWaitFor(bad); err == nil {
			t.Errorf("ParseWaitFor(%q) accepted", bad)
		}
	}
	offer := func(cpu, dph float64) market.Ranked {
		return market.Ranked{Offer: market.Offer{CPUCoresEffective: cpu, DPHTotal: dph}}
	}
	// The market is too dear for two polls, then opens.
	polls := 0
	clk := clock.Stepped{M: clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	pollF := func(context.Context) ([]market.Ranked, error) {
		polls++
		if polls < 3 {
			return []market.Ranked{offer(3000, 10), offer(3000, 10)}, nil
		}
		return []market.Ranked{offer(3000, 5), offer(3000, 5)}, nil
	}
	cond, _ := ParseWaitFor("vcpu>=5000 dph_per_vcpu<=0.002")
	_, m, err := WaitFor(context.Background(), cond, 2, pollF, time.Minute, time.Hour, clk)
	if err != nil || polls != 3 || m.VCPU != 6000 {
		t.Fatalf("polls %d, metrics %+v, err %v", polls, m, err)
	}
	// Never opens: expires after wait-max and says why.
	polls = 0
	cond2, _ := ParseWaitFor("dph<1")
	_, _, err = WaitFor(context.Background(), cond2, 2, pollF, time.Minute, 10*time.Minute, clk)
	if !errors.Is(err, ErrWaitExpired) || !strings.Contains(err.Error(), "dph<1") {
		t.Fatalf("err = %v", err)
	}
	if polls < 9 || polls > 11 {
		t.Errorf("%d polls in 10 minutes at 1/min", polls)
	}
}
