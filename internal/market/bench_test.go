package market

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// syntheticOffers builds a deterministic market loosely shaped like the real
// one (market-facts.md): many cheap consumer GPUs, some CN/HK hosts, a wide
// spread of vCPUs and bandwidth.
func syntheticOffers(n int) []Offer {
	r := rand.New(rand.NewPCG(1, 2))
	countries := []string{"US", "CA", "DE", "FR", "PL", "CN", "HK", "JP", "SE", "BR", "GB", "NL"}
	cores := []float64{4, 8, 12, 16, 24, 32, 48, 64, 96, 128}
	offers := make([]Offer, n)
	for i := range offers {
		m := GPUModels[r.IntN(len(GPUModels))]
		gpus := 1 << r.IntN(4)
		dph := (0.02 + r.ExpFloat64()*0.25) * float64(gpus) * (0.5 + m.Speed)
		offers[i] = Offer{
			ID: int64(1000000 + i), MachineID: int64(r.IntN(n/3 + 1)), HostID: int64(r.IntN(5000)),
			NumGPUs: gpus, GPUName: m.Name, GPURAM: m.VRAMMB, GPUTotalRAM: m.VRAMMB * float64(gpus),
			CPUCoresEffective: cores[r.IntN(len(cores))], CPURAM: float64(16000 * (1 + r.IntN(32))),
			DiskSpace: float64(10 + r.IntN(2000)), InetUp: r.ExpFloat64() * 400, InetDown: r.ExpFloat64() * 800,
			DPHTotal: dph, DPHBase: dph * 0.95, Reliability: 0.9 + r.Float64()*0.1,
			Verification: []string{"verified", "unverified"}[r.IntN(2)], Rentable: r.IntN(10) > 0,
			External: r.IntN(4) == 0, Geolocation: fmt.Sprintf("Somewhere, %s", countries[r.IntN(len(countries))]),
		}
	}
	return offers
}

func BenchmarkFilterScoreSort100k(b *testing.B) {
	offers := syntheticOffers(100_000)
	q, _, err := Parse(mustShowQuery, ParseOptions{NoDefault: true, Limit: 100, Order: "+dph_total,+id"})
	if err != nil {
		b.Fatal(err)
	}
	s, _ := ScoreBy("vcpu")
	matched := make([]Offer, 0, len(offers))
	b.ReportAllocs()
	var kept int
	for b.Loop() {
		f, err := Compile(q)
		if err != nil {
			b.Fatal(err)
		}
		matched = matched[:0]
		for i := range offers {
			if f.Match(&offers[i]) {
				matched = append(matched, offers[i])
			}
		}
		kept = len(Rank(matched, s))
	}
	b.ReportMetric(float64(kept), "matched")
}

func TestSyntheticMarketShape(t *testing.T) {
	offers := syntheticOffers(10_000)
	q, _, _ := Parse(mustShowQuery, ParseOptions{NoDefault: true})
	got, err := Select(offers, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Enough survive to make the benchmark's rank and sort do real work.
	if len(got) < 500 || len(got) > 5000 {
		t.Errorf("%d of 10000 match the must-show query", len(got))
	}
}

// BenchmarkDecodeOffersFile decodes an offers dump named by
// VASTFLEET_OFFERS_FILE (make one with the Python recipe's --gen).
func BenchmarkDecodeOffersFile(b *testing.B) {
	path := os.Getenv("VASTFLEET_OFFERS_FILE")
	if path == "" {
		b.Skip("set VASTFLEET_OFFERS_FILE to an offers JSON file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := DecodeOffers(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkScanOffersFile is the scanner alone over VASTFLEET_OFFERS_FILE.
func BenchmarkScanOffersFile(b *testing.B) {
	path := os.Getenv("VASTFLEET_OFFERS_FILE")
	if path == "" {
		b.Skip("set VASTFLEET_OFFERS_FILE to an offers JSON file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if err := ScanOffers(data, func(*Offer) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRankIndices100k is the filter-score-sort core over 100,000
// offers with the recipe's filter, nothing copied (what `bench rank`
// measures in-process against the recipe's rank()).
func BenchmarkRankIndices100k(b *testing.B) {
	offers := syntheticOffers(100_000)
	q, _, err := Parse("cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5", ParseOptions{NoDefault: true})
	if err != nil {
		b.Fatal(err)
	}
	f, err := Compile(q)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := ScoreBy("vcpu")
	var n int
	for b.Loop() {
		n = len(RankIndices(offers, f.Match, s, 0))
	}
	b.ReportMetric(float64(n), "matched")
}

// BenchmarkRankIndicesFile is BenchmarkRankIndices100k over the offers in
// VASTFLEET_OFFERS_FILE (the recipe's own --gen output, say).
func BenchmarkRankIndicesFile(b *testing.B) {
	path := os.Getenv("VASTFLEET_OFFERS_FILE")
	if path == "" {
		b.Skip("set VASTFLEET_OFFERS_FILE to an offers JSON file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	offers, err := DecodeOffers(data)
	if err != nil {
		b.Fatal(err)
	}
	q, _, err := Parse("cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5", ParseOptions{NoDefault: true})
	if err != nil {
		b.Fatal(err)
	}
	f, err := Compile(q)
	if err != nil {
		b.Fatal(err)
	}
	s, _ := ScoreBy("vcpu")
	var n int
	for b.Loop() {
		n = len(RankIndices(offers, f.Match, s, 0))
	}
	b.ReportMetric(float64(n), "matched")
}
