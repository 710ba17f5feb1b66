package market

import (
	"math"
	"testing"
	"time"
)

func TestFaultChanceFollowsReliabilityVerificationAndRecord(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		rel    float64
		verif  string
		fails  int
		lo, hi float64
	}{
		{"0.99 verified", 0.99, "verified", 0, 0.01, 0.03},
		{"0.98 verified: about one in twenty or fewer", 0.98, "verified", 0, 0.02, 0.05},
		{"0.98 unverified", 0.98, "unverified", 0, 0.04, 0.08},
		{"0.88 unverified: about one in four", 0.88, "unverified", 0, 0.2, 0.35},
		{"0.999 keeps a floor", 0.999, "verified", 0, 0.01, 0.02},
		{"deverified is worse", 0.98, "deverified", 0, 0.1, 0.15},
		{"one failure on record doubles the hazard", 0.98, "verified", 1, 0.05, 0.07},
		{"the record counts at most twice", 0.98, "verified", 9, 0.1, 0.13},
	}
	for _, c := range cases {
		got := FaultChance(&Offer{Reliability: c.rel, Verification: c.verif}, HostRecord{Failures: c.fails})
		if got < c.lo || got > c.hi {
			t.Errorf("%s: p_fault %.4f, want in [%.2f, %.2f]", c.name, got, c.lo, c.hi)
		}
	}
	// Monotone in reliability.
	prev := 1.0
	for rel := 0.80; rel <= 0.999; rel += 0.01 {
		p := FaultChance(&Offer{Reliability: rel, Verification: "verified"}, HostRecord{})
		if p > prev {
			t.Fatalf("p_fault rises with reliability at %.2f: %.4f > %.4f", rel, p, prev)
		}
		prev = p
	}
}

func TestOnTimeChance(t *testing.T) {
	t.Parallel()
	m := time.Minute
	cases := []struct {
		load, deadline time.Duration
		want           float64
	}{
		{m, 0, 1},                       // no deadline
		{m, 30 * m, 1},                  // even a 20× slow boot makes it
		{m, 5 * m, 0.8},                 // usual boots only
		{m, 12*m + 30*time.Second, 0.9}, // 12.5×: half the slow ones
		{10 * m, 5 * m, 0},              // not even the usual boot
		{5 * m, 5 * m, 0.8},             // just
	}
	for _, c := range cases {
		if got := OnTimeChance(c.load, c.deadline); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("load %v deadline %v: %.4f, want %.4f", c.load, c.deadline, got, c.want)
		}
	}
}

func TestUsefulTerms(t *testing.T) {
	t.Parallel()
	const gb = 5.0
	base := Offer{ID: 1, MachineID: 11, CPUCoresEffective: 32, DPHTotal: 0.40, Reliability: 0.995, Verification: "verified",
		InetDown: 2000, DiskBW: 2000, InetDownCost: 0.01}
	u := &Useful{ImageGB: gb, Deadline: 6 * time.Minute, KeepHours: 1}
	t.Run("a sound host costs its price and waste over its chance", func(t *testing.T) {
		tm := u.Terms(&base)
		if tm.P < 0.75 || tm.P > 0.8 {
			t.Fatalf("p_useful %.4f, want about 0.8 × (1 - p_fault)", tm.P)
		}
		wantBoot := gb*0.01 + base.DPHTotal*tm.LoadS/3600
		if math.Abs(tm.BootWaste-wantBoot) > 1e-12 {
			t.Fatalf("boot waste %.6f, want %.6f", tm.BootWaste, wantBoot)
		}
		wantCost := (base.DPHTotal + tm.BootWaste + tm.FailWaste) / tm.P
		if math.Abs(tm.Cost-wantCost) > 1e-12 || math.Abs(tm.Score-1/wantCost) > 1e-12 {
			t.Fatalf("cost %.6f score %.6f, want %.6f and %.6f", tm.Cost, tm.Score, wantCost, 1/wantCost)
		}
		// Paying for the misses: an hour kept costs more than an hour's price.
		if tm.Cost <= base.DPHTotal/tm.P {
			t.Fatalf("cost per useful node $%.4f for a $%.2f/h host", tm.Cost, base.DPHTotal)
		}
	})
	cheapShaky := base
	cheapShaky.ID, cheapShaky.MachineID, cheapShaky.DPHTotal, cheapShaky.Reliability, cheapShaky.Verification = 2, 12, 0.36, 0.90, "unverified"
	t.Run("a 10% cheaper host that fails five times as often ranks behind", func(t *testing.T) {
		if v, _ := ScoreBy("vcpu"); v.Score(&cheapShaky) <= v.Score(&base) {
			t.Fatal("test premise: vcpu should prefer the cheap host")
		}
		if u.Score(&cheapShaky) >= u.Score(&base) {
			t.Fatalf("useful: shaky %.2f >= sound %.2f", u.Score(&cheapShaky), u.Score(&base))
		}
	})
	t.Run("a slightly dearer reliable host beats a cheap unreliable one", func(t *testing.T) {
		shaky := base
		shaky.ID, shaky.MachineID, shaky.DPHTotal, shaky.Reliability, shaky.Verification = 4, 14, 0.38, 0.88, "unverified"
		sound := base
		sound.DPHTotal = 0.42 // 10% dearer, reliability 0.995 verified
		ts, tr := u.Terms(&shaky), u.Terms(&sound)
		if ts.Cost <= tr.Cost || u.Score(&shaky) >= u.Score(&sound) {
			t.Fatalf("shaky $%.2f/h costs $%.4f a useful node, sound $%.2f/h $%.4f: want the sound one cheaper",
				shaky.DPHTotal, ts.Cost, sound.DPHTotal, tr.Cost)
		}
		if r := Rank([]Offer{shaky, sound}, u); r[0].ID != sound.ID {
			t.Fatalf("ranked %d first, want the sound host %d", r[0].ID, sound.ID)
		}
	})
	t.Run("at the same reliability the node that costs less wins, whatever its size", func(t *testing.T) {
		big := base
		big.ID, big.MachineID, big.CPUCoresEffective, big.DPHTotal = 5, 15, 64, 0.60 // $0.0094/vCPU
		small := base
		small.ID, small.MachineID, small.CPUCoresEffective, small.DPHTotal = 6, 16, 16, 0.20 // $0.0125/vCPU
		if v, _ := ScoreBy("vcpu"); v.Score(&big) <= v.Score(&small) {
			t.Fatal("test premise: vcpu prefers the big node")
		}
		tb, ts := u.Terms(&big), u.Terms(&small)
		if math.Abs(tb.P-ts.P) > 1e-12 {
			t.Fatalf("premise: same chance, got %.4f and %.4f", tb.P, ts.P)
		}
		if ts.Cost >= tb.Cost {
			t.Fatalf("small node $%.4f per useful node, big $%.4f", ts.Cost, tb.Cost)
		}
		if r := Rank([]Offer{big, small}, u); r[0].ID != small.ID {
			t.Fatalf("ranked %d first, want the cheaper node %d", r[0].ID, small.ID)
		}
	})
	slow := base
	slow.ID, slow.InetDown, slow.DiskBW, slow.DPHTotal = 3, 20, 100, 0.30
	t.Run("a cheap host that cannot load in time ranks behind", func(t *testing.T) {
		tm := u.Terms(&slow)
		if tm.POnTime != 0 || tm.Score != 0 || !math.IsInf(tm.Cost, 1) {
			t.Fatalf("slow host: %+v", tm)
		}
	})
	t.Run("the record and the bad-host list", func(t *testing.T) {
		rec := map[int64]HostRecord{11: {Failures: 1}, 12: {Bad: true}}
		ur := *u
		ur.Record = func(id int64) HostRecord { return rec[id] }
		if ur.Score(&base) >= u.Score(&base) {
			t.Fatal("a failure on record does not lower the score")
		}
		if tm := ur.Terms(&cheapShaky); tm.P != 0 || tm.Score != 0 {
			t.Fatalf("bad host: %+v", tm)
		}
	})
	t.Run("outbids count for bids only", func(t *testing.T) {
		ub := *u
		ub.OutbidPerHour = 0.5
		if ub.Score(&base) != u.Score(&base) {
			t.Fatal("on-demand offer scored by the outbid rate")
		}
		bid := base
		bid.IsBid = true
		tb, to := ub.Terms(&bid), u.Terms(&bid)
		if math.Abs(tb.PKept/to.PKept-math.Exp(-0.5)) > 1e-9 {
			t.Fatalf("p_kept %.4f against %.4f: want e^-0.5 of it", tb.PKept, to.PKept)
		}
	})
	t.Run("no price, no score", func(t *testing.T) {
		free := base
		free.DPHTotal = 0
		if s := u.Score(&free); s != 0 {
			t.Fatalf("score %v", s)
		}
	})
	t.Run("rank orders by it", func(t *testing.T) {
		r := Rank([]Offer{cheapShaky, slow, base}, u)
		if r[0].ID != 1 || r[1].ID != 2 || r[2].ID != 3 {
			t.Fatalf("order %d %d %d, want 1 2 3", r[0].ID, r[1].ID, r[2].ID)
		}
	})
}
