package job

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vastfleet/vastfleet/internal/store"
)

// node is a report node that delivered items for a cost.
func node(id int64, model string, items int, total float64) ReportNode {
	n := ReportNode{ID: id, Ran: true, Model: model, ItemsDone: items, Total: total}
	if total > 0 {
		n.ItemsPerDollar = float64(items) / total
	}
	return n
}

// TestDelivery: the summary counts only instances that delivered items
// for money; medians average the middle pair; ties name the lowest id;
// models come best median first, by name when tied.
func TestDelivery(t *testing.T) {
	t.Parallel()
	const a, b = "1x RTX 4090", "8x H100 SXM"
	for _, tc := range []struct {
		name  string
		nodes []ReportNode
		want  *Delivery
	}{
		{"no nodes", nil, nil},
		{"none delivered", []ReportNode{node(1, a, 0, 2), node(2, a, 5, 0)}, nil},
		{"one", []ReportNode{node(7, a, 10, 2)}, &Delivery{
			Instances: 1, MedianItemsPerDollar: 5,
			Best: DeliveryNode{7, 5, a}, Worst: DeliveryNode{7, 5, a},
			ByModel: []ModelDelivery{{a, 1, 5, 10, 2}},
		}},
		{"odd count, one model, idle and free nodes left out", []ReportNode{
			node(1, a, 30, 1), node(2, a, 0, 4), node(3, a, 10, 1), node(4, a, 20, 1), node(5, a, 3, 0),
		}, &Delivery{
			Instances: 3, MedianItemsPerDollar: 20,
			Best: DeliveryNode{1, 30, a}, Worst: DeliveryNode{3, 10, a},
			ByModel: []ModelDelivery{{a, 3, 20, 60, 3}},
		}},
		{"even count, two models", []ReportNode{
			node(1, a, 10, 1), node(2, b, 40, 1), node(3, a, 20, 1), node(4, b, 60, 2),
		}, &Delivery{
			// 10, 20, 30, 40: the middle pair 20 and 30.
			Instances: 4, MedianItemsPerDollar: 25,
			Best: DeliveryNode{2, 40, b}, Worst: DeliveryNode{1, 10, a},
			ByModel: []ModelDelivery{{b, 2, 35, 100, 3}, {a, 2, 15, 30, 2}},
		}},
		{"ties name the lowest id; tied models by name", []ReportNode{
			node(9, b, 10, 1), node(4, b, 20, 1), node(8, a, 20, 1), node(3, a, 10, 1), node(6, b, 0, 1),
		}, &Delivery{
			Instances: 4, MedianItemsPerDollar: 15,
			Best: DeliveryNode{4, 20, b}, Worst: DeliveryNode{3, 10, a},
			ByModel: []ModelDelivery{{a, 2, 15, 30, 2}, {b, 2, 15, 30, 2}},
		}},
		{"a node of no known model", []ReportNode{node(1, "", 4, 1)}, &Delivery{
			Instances: 1, MedianItemsPerDollar: 4,
			Best: DeliveryNode{1, 4, "unknown"}, Worst: DeliveryNode{1, 4, "unknown"},
			ByModel: []ModelDelivery{{"unknown", 1, 4, 4, 1}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, delivery(tc.nodes)); diff != "" {
				t.Errorf("delivery (-want +got):\n%s", diff)
			}
		})
	}
}

// TestHardwareModel: GPUs name an instance's hardware; without them, what
// the store has (it records no CPU name).
func TestHardwareModel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   store.Instance
		want string
	}{
		{store.Instance{GPUName: "RTX 4090", NumGPUs: 2, CPUCores: 32}, "2x RTX 4090"},
		{store.Instance{GPUName: "H100 SXM", NumGPUs: 1}, "1x H100 SXM"},
		{store.Instance{GPUName: "RTX 3090"}, "RTX 3090"},
		{store.Instance{CPUCores: 32}, "32 vCPU"},
		{store.Instance{CPUCores: 12.5}, "12.5 vCPU"},
		{store.Instance{}, "unknown"},
	} {
		if got := hardwareModel(tc.in); got != tc.want {
			t.Errorf("hardwareModel(%+v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSavedReportWithoutDelivery: a report written before reports carried
// the delivery summary gets it from its nodes when read back.
func TestSavedReportWithoutDelivery(t *testing.T) {
	t.Parallel()
	recs := &Records{Dir: t.TempDir()}
	old := `{"job":"j1","nodes":[{"id":1,"ran":true,"total":2,"items_done":10,"items_per_dollar":5},` +
		`{"id":2,"ran":true,"total":1,"items_done":0}],"items_done":10}`
	if err := os.MkdirAll(filepath.Join(recs.Dir, "j1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(recs.Dir, "j1", "report.json"), []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, ok := SavedReport(recs, "j1")
	if !ok {
		t.Fatal("SavedReport: not read")
	}
	want := &Delivery{Instances: 1, MedianItemsPerDollar: 5, Best: DeliveryNode{1, 5, "unknown"},
		Worst: DeliveryNode{1, 5, "unknown"}, ByModel: []ModelDelivery{{"unknown", 1, 5, 10, 2}}}
	if diff := cmp.Diff(want, rep.Delivery); diff != "" {
		t.Errorf("delivery (-want +got):\n%s", diff)
	}
}
