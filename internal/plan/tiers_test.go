package plan

import (
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

func mustReq(t *testing.T, task Task) Req {
	t.Helper()
	r, err := Requirements(task)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTiers(t *testing.T) {
	tests := []struct {
		name  string
		task  Task
		want  []string // tier names
		query map[string]string
	}{
		{"7B inference: budget and fast", Task{Model: "7b", Mode: "inference"}, []string{"budget", "fast"}, map[string]string{
			"budget": "gpu_ram>=16.8 num_gpus=1 reliability>0.95 inet_down>100 disk_space>=50 cuda_max_good>=12.1",
		}},
		{"13B inference adds high-VRAM", Task{Model: "13b", Mode: "inference"}, []string{"budget", "fast", "high-vram"}, map[string]string{
			"budget":    "gpu_ram>=31.2 num_gpus=1 reliability>0.95 inet_down>100 disk_space>=54 cuda_max_good>=12.1",
			"high-vram": "gpu_ram>=48 num_gpus=1 reliability>0.95 inet_down>100 disk_space>=54 cuda_max_good>=12.1",
		}},
		{"70B inference: per-GPU share on 3 GPUs", Task{Model: "70b", Mode: "inference"}, []string{"budget", "fast", "high-vram"}, map[string]string{
			"budget":    "gpu_ram>=56 num_gpus>=3 reliability>0.95 inet_down>100 disk_space>=168 cuda_max_good>=12.1",
			"high-vram": "gpu_ram>=56 num_gpus>=3 reliability>0.95 inet_down>100 disk_space>=168 cuda_max_good>=12.1",
		}},
		{"DDP gpt2: replicas on 2 GPUs", Task{Model: "gpt2", Mode: "train", Distributed: "ddp"}, []string{"budget", "fast"}, map[string]string{
			"budget": "gpu_ram>=2.8 num_gpus>=2 reliability>0.95 inet_down>100 disk_space>=50 cuda_max_good>=12.1",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustReq(t, tc.task)
			tiers := Tiers(r)
			var names []string
			for _, tr := range tiers {
				names = append(names, tr.Name)
				if tr.Why == "" {
					t.Errorf("tier %s has no Why", tr.Name)
				}
				if want, ok := tc.query[tr.Name]; ok && tr.Query != want {
					t.Errorf("tier %s query\n got %s\nwant %s", tr.Name, tr.Query, want)
				}
				q, warns, err := market.Parse(tr.Query, market.ParseOptions{Order: tr.Order, Storage: r.DiskGB})
				if err != nil || len(warns) > 0 {
					t.Fatalf("market.Parse(%q) = %v, %v", tr.Query, warns, err)
				}
				if _, err := market.Compile(q); err != nil {
					t.Fatalf("market.Compile(%q): %v", tr.Query, err)
				}
			}
			if len(names) != len(tc.want) {
				t.Fatalf("tiers = %v, want %v", names, tc.want)
			}
			for i := range names {
				if names[i] != tc.want[i] {
					t.Errorf("tiers = %v, want %v", names, tc.want)
				}
			}
		})
	}
}

// The budget tier's query and Options' own filter must agree on which
// cards are big enough, so what the CLI finds is what Options keeps.
func TestTierQueryAgreesWithOptionsFilter(t *testing.T) {
	r := mustReq(t, Task{Model: "7b", Mode: "inference"}) // 16.8 GB
	var offers []market.Offer
	for i, g := range market.GPUModels {
		o := offer(int64(i+1), g.Name, 1, g.VRAMMB/1024, 0.3, 0.99, 500)
		o.Verification, o.Rentable = "verified", true
		offers = append(offers, o)
	}
	q, _, err := market.Parse(Tiers(r)[0].Query, market.ParseOptions{Storage: r.DiskGB})
	if err != nil {
		t.Fatal(err)
	}
	f, err := market.Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range offers {
		if got, want := f.Match(&o), rejects(r, o) == ""; got != want {
			t.Errorf("%s (%v MB): query match %v, Options keeps %v", o.GPUName, o.GPURAM, got, want)
		}
	}
}
