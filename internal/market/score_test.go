package market

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScoreBy(t *testing.T) {
	o := sampleOffer() // 32 vCPU, 2× RTX 4090, $0.8/h
	o.DLPerf = 80
	for kind, want := range map[string]float64{"vcpu": 40, "gpu": 1.6 * 2 / 0.8, "dlperf": 100} {
		s, err := ScoreBy(kind)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Score(&o); math.Abs(got-want) > 1e-9 || s.Name() != kind {
			t.Errorf("%s: %v (%s), want %v", kind, got, s.Name(), want)
		}
	}
	o.DPHTotal = 0
	s, _ := ScoreBy("vcpu")
	if got := s.Score(&o); got != 0 {
		t.Errorf("zero price scores %v, want 0", got)
	}
	if _, err := ScoreBy("ram"); err == nil || !strings.Contains(err.Error(), "vcpu, gpu, dlperf") {
		t.Errorf("ScoreBy(ram) err = %v, want the valid kinds listed", err)
	}
}

func TestScoreExpr(t *testing.T) {
	o := sampleOffer()
	s, err := ScoreExpr("cpu_cores_effective / dph_total * reliability")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Score(&o), 32/0.8*0.98; math.Abs(got-want) > 1e-9 {
		t.Errorf("score %v, want %v", got, want)
	}
	s, err = ScoreExpr(`gpu_name == "RTX 4090" && verified ? num_gpus * 10 : 1`)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Score(&o); got != 20 {
		t.Errorf("conditional score %v, want 20", got)
	}
	for _, tc := range []struct{ src, want string }{
		{"cpu_cores_efective / dph_total", "unknown name cpu_cores_efective"},
		{"cpu_cores_effective /", "unexpected token"},
		{"gpu_name", "must give a number"},
		{"  ", "empty"},
	} {
		if _, err := ScoreExpr(tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ScoreExpr(%q) err = %v, want it to mention %q", tc.src, err, tc.want)
		}
	}
}

func TestRank(t *testing.T) {
	mk := func(id int64, cores, dph float64) Offer {
		return Offer{ID: id, CPUCoresEffective: cores, DPHTotal: dph}
	}
	offers := []Offer{
		mk(1, 10, 1),  // 10
		mk(2, 40, 2),  // 20
		mk(3, 5, 0),   // free: invalid, last
		mk(4, 20, 1),  // 20, cheaper than #2
		mk(5, 20, 1),  // 20, same price as #4, higher id
		mk(6, 0, 0.5), // 0
		mk(7, 10, -1), // negative price: invalid
	}
	s, _ := ScoreBy("vcpu")
	r := Rank(offers, s)
	var ids []int64
	for _, x := range r {
		ids = append(ids, x.ID)
	}
	if d := cmp.Diff([]int64{4, 5, 2, 1, 6, 7, 3}, ids); d != "" {
		t.Errorf("rank order (-want +got):\n%s", d)
	}
	if r[0].Score != 20 || r[5].Score != 0 || r[6].Score != 0 {
		t.Errorf("scores: %v %v %v", r[0].Score, r[5].Score, r[6].Score)
	}
	// An expression that divides by a zero price yields Inf: scored 0, last.
	e, _ := ScoreExpr("cpu_cores_effective / dph_total")
	r = Rank([]Offer{mk(1, 1, 0), mk(2, 1, 1)}, e)
	if r[0].ID != 2 || r[1].Score != 0 {
		t.Errorf("inf score not demoted: %+v", r)
	}
}

func TestRankedJSONScoreOverridesOffer(t *testing.T) {
	r := Ranked{Offer: Offer{ID: 1, VastScore: 999}, Score: 12.5}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["score"] != 12.5 || m["id"] != 1.0 {
		t.Errorf("Ranked JSON score = %v id = %v, want 12.5 and 1 (%s)", m["score"], m["id"], b)
	}
	if strings.Count(string(b), `"score"`) != 1 {
		t.Errorf("score key appears more than once: %s", b)
	}
}

func TestDepthTable(t *testing.T) {
	var ranked []Ranked
	for i := 1; i <= 5; i++ {
		ranked = append(ranked, Ranked{Offer: Offer{ID: int64(i), CPUCoresEffective: float64(10 * i), CPURAM: 1000 * float64(i), DPHTotal: 0.5, NumGPUs: i}})
	}
	got := DepthTable(ranked, []int{3, 1, 10})
	want := []Depth{
		{N: 3, VCPU: 60, RAMGB: 6, DPH: 1.5, GPUs: 6},
		{N: 1, VCPU: 10, RAMGB: 1, DPH: 0.5, GPUs: 1},
		{N: 5, VCPU: 150, RAMGB: 15, DPH: 2.5, GPUs: 15},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestExplain(t *testing.T) {
	o := sampleOffer()
	s, _ := ScoreBy("vcpu")
	if d := cmp.Diff([]Factor{{"cpu_cores_effective", 32}, {"dph_total", 0.8}}, Explain(s, &o)); d != "" {
		t.Errorf("vcpu factors: %s", d)
	}
	e, _ := ScoreExpr("cpu_cores_effective / dph_total * reliability")
	if d := cmp.Diff([]Factor{{"cpu_cores_effective", 32}, {"dph_total", 0.8}, {"reliability", 0.98}}, Explain(e, &o)); d != "" {
		t.Errorf("expr factors: %s", d)
	}
}

func TestScoreExprCostIsBounded(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		// The nested loop: 14.6 s for 64 offers before.
		{"nested loop", "sum(1..1000, sum(1..1000, # * cpu_cores_effective)) / dph_total", "loop inside a loop"},
		{"nested predicate in map", "len(filter(map(1..10, #), any(1..10, # > 3)))", "loop inside a loop"},
		{"huge range", "sum(1..100000000, #) * reliability", "at most 1000"},
		{"unbounded string", `len(repeat("x", 1000000000))`, "repeat"},
		{"wall clock", "now().Unix() + dph_total", "now"},
		{"too long", strings.Repeat("dph_total + ", 90) + "1", "at most 1000"},
		{"too many nodes", strings.Repeat("1+", 300) + "1", "exceeds maximum allowed nodes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ScoreExpr(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ScoreExpr(%.60q) err = %v, want a refusal mentioning %q", tc.src, err, tc.want)
			}
		})
	}
	// A loop over a range the offer sizes passes the compile checks; the
	// run-time budget stops it on an offer that makes it huge, scoring 0.
	s, err := ScoreExpr("sum(1..int(cpu_ram), 1) / dph_total")
	if err != nil {
		t.Fatal(err)
	}
	small := Offer{CPURAM: 100, DPHTotal: 1}
	if got := s.Score(&small); got != 100 {
		t.Errorf("small range scored %v, want 100", got)
	}
	huge := Offer{CPURAM: 1e12, DPHTotal: 1}
	if got := s.Score(&huge); got != 0 {
		t.Errorf("range of 1e12 elements scored %v, want 0 (stopped by the memory budget)", got)
	}
	// Loops a score may reasonably use still work.
	if _, err := ScoreExpr("sum(1..10, # * cpu_cores_effective) / dph_total"); err != nil {
		t.Errorf("a small loop was refused: %v", err)
	}
}

// countingScorer cancels ctx at its first score and counts the rest.
type countingScorer struct {
	cancel context.CancelFunc
	calls  atomic.Int64
}

func (c *countingScorer) Name() string { return "counting" }
func (c *countingScorer) Score(o *Offer) float64 {
	c.calls.Add(1)
	c.cancel()
	return o.CPUCoresEffective
}

func TestRankStopsWhenCancelled(t *testing.T) {
	offers := make([]Offer, 3*rankCheckEvery)
	for i := range offers {
		offers[i] = Offer{ID: int64(i + 1), CPUCoresEffective: float64(i), DPHTotal: 1}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &countingScorer{cancel: cancel}
	ranked, err := RankContext(ctx, offers, s)
	if !errors.Is(err, context.Canceled) || ranked != nil {
		t.Fatalf("RankContext after cancel = %d offers, %v; want context.Canceled", len(ranked), err)
	}
	if n := s.calls.Load(); n > rankCheckEvery {
		t.Errorf("scored %d offers after the cancel; want at most %d", n, rankCheckEvery)
	}

	data, err := json.Marshal(map[string]any{"offers": offers})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	s = &countingScorer{cancel: cancel}
	_, err = RankScan(ctx, data, func(*Offer) bool { return true }, s, 10)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RankScan after cancel: %v, want context.Canceled", err)
	}
	if n := s.calls.Load(); n > rankCheckEvery {
		t.Errorf("RankScan scored %d offers after the cancel; want at most %d", n, rankCheckEvery)
	}
	// Not cancelled: the same as Rank.
	vcpu, _ := ScoreBy("vcpu")
	got, err := RankContext(context.Background(), offers[:5], vcpu)
	if err != nil || len(got) != 5 || got[0].ID != 5 {
		t.Fatalf("RankContext = %v, %v; want 5 offers, id 5 first", got, err)
	}
}
