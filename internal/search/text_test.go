package search

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

func offers() []market.Ranked {
	return []market.Ranked{
		{Offer: market.Offer{ID: 1, CPUCoresEffective: 16, CPURAM: 64000, DPHTotal: 0.2, NumGPUs: 1, GPUName: "RTX 3090", Geolocation: "FR", Reliability: 0.99}, Score: 80},
		{Offer: market.Offer{ID: 2, CPUCoresEffective: 8.5, CPURAM: 32000, DPHTotal: 0.1, NumGPUs: 2, GPUName: "RTX 4090", Geolocation: "US", Reliability: 0.95}, Score: 85},
	}
}

func TestWriteOffersSumsTheFleet(t *testing.T) {
	var b bytes.Buffer
	if err := WriteOffers(&b, offers()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[1], "1\t80.00\t16\t64 GB\t0.200\t1\tRTX 3090\tFR\t0.990") {
		t.Fatalf("table:\n%s", b.String())
	}
	if want := "TOTAL\t2 offers\t24.5\t96 GB\t0.300\t3\t\t\t"; lines[3] != want {
		t.Errorf("total row %q, want %q", lines[3], want)
	}
}

func TestWriteExplainWithoutAScoreSaysTheOrderIsTheMarketplaces(t *testing.T) {
	var b bytes.Buffer
	WriteExplain(&b, "POST", "/api/v0/bundles/", []byte(`{"q":1}`), nil, offers())
	if want := "\nquery sent (POST /api/v0/bundles/): {\"q\":1}\norder: the marketplace's own (no --by or --score)\n"; b.String() != want {
		t.Errorf("explain %q, want %q", b.String(), want)
	}
}

func TestSaveIsReadBackAsARanking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ranked.json")
	if err := Save(path, offers()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back []market.Ranked
	if err := json.Unmarshal(data, &back); err != nil || len(back) != 2 || back[1].ID != 2 || back[1].Score != 85 {
		t.Fatalf("saved %s: %v", data, err)
	}
	ranked, err := File(context.Background(), data, market.Query{}, nil)
	if err != nil || len(ranked) != 2 {
		t.Errorf("File read %d offers back: %v", len(ranked), err)
	}
}
