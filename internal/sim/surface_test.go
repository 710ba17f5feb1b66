package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// cliOfferColumns is the official CLI's offers_fields (vast.py): every
// column `vastai search offers` knows without a warning.
var cliOfferColumns = []string{
	"bw_nvlink", "compute_cap", "cpu_arch", "cpu_cores", "cpu_cores_effective", "cpu_ghz", "cpu_ram", "cuda_max_good",
	"datacenter", "direct_port_count", "driver_version", "disk_bw", "disk_space", "dlperf", "dlperf_per_dphtotal",
	"dph_total", "duration", "external", "flops_per_dphtotal", "gpu_arch", "gpu_display_active", "gpu_frac", "gpu_mem_bw",
	"gpu_name", "gpu_ram", "gpu_total_ram", "gpu_max_power", "gpu_max_temp", "has_avx", "host_id", "id", "inet_down",
	"inet_down_cost", "inet_up", "inet_up_cost", "machine_id", "min_bid", "mobo_name", "num_gpus", "pci_gen", "pcie_bw",
	"reliability", "rentable", "rented", "storage_cost", "static_ip", "total_flops", "ubuntu_version", "verification",
	"verified", "vms_enabled", "geolocation", "cluster_id",
}

// TestEveryCLIOfferColumnIsSearchable: a search on any column the official
// CLI knows is answered, not refused; bw_nvlink was refused before.
func TestEveryCLIOfferColumnIsSearchable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 2})
	str := map[string]string{"cpu_arch": "amd64", "gpu_arch": "nvidia", "gpu_name": "RTX 3090", "mobo_name": "Generic Board",
		"ubuntu_version": "22.04", "verification": "verified", "geolocation": "US", "driver_version": "535.104.05"}
	for _, col := range cliOfferColumns {
		val := `{"gte": "0"}`
		switch {
		case str[col] != "":
			val = fmt.Sprintf(`{"eq": %q}`, str[col])
		case col == "datacenter" || col == "external" || col == "gpu_display_active" || col == "rentable" ||
			col == "rented" || col == "static_ip" || col == "verified" || col == "vms_enabled":
			val = `{"eq": true}`
		}
		body := fmt.Sprintf(`{%q: %s, "limit": 5}`, col, val)
		var out struct{ Offers []map[string]any }
		if st, _, b := h.do("POST", "/api/v0/bundles/", json.RawMessage(body), nil); st != 200 {
			t.Errorf("%s: %d %s", body, st, b)
			continue
		}
		h.do("POST", "/api/v0/bundles/", json.RawMessage(body), &out)
		if col == "bw_nvlink" && len(out.Offers) > 0 {
			if _, ok := out.Offers[0]["bw_nvlink"]; !ok {
				t.Errorf("offers carry no bw_nvlink column")
			}
		}
	}
	// NVLink only between the GPUs of an SXM board.
	linked := h.search(`{"bw_nvlink": {"gt": "0"}, "limit": 1000}`)
	if len(linked) == 0 {
		t.Fatal("no offer has NVLink")
	}
	for _, o := range linked {
		if o.NumGPUs < 2 || !strings.Contains(o.GPUName, "SXM") && o.GPUName != "H200" {
			t.Fatalf("offer %d (%d× %s) has NVLink", o.ID, o.NumGPUs, o.GPUName)
		}
	}
}

// TestLogsNeverEmpty: an instance with no onstart, on a market with
// machines behind its instances, still has logs: its container's start.
func TestLogsNeverEmpty(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 10, HostDir: t.TempDir()})
	t.Cleanup(func() { h.m.Close() })
	o := h.cheapOffer()
	var created struct {
		NewContract int64 `json:"new_contract"`
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/asks/%d/", o.ID), map[string]any{"image": "ubuntu:22.04", "disk": 10}, &created); st != 200 {
		t.Fatalf("create: %d %s", st, b)
	}
	for i := 0; h.show(created.NewContract).Status() != "running"; i++ {
		if i > 1000 {
			t.Fatal("never running")
		}
		h.clock.Advance(10 * time.Second)
	}
	var out struct {
		ResultURL string `json:"result_url"`
	}
	h.do("PUT", fmt.Sprintf("/api/v0/instances/request_logs/%d/", created.NewContract), map[string]string{"tail": "1000"}, &out)
	resp, err := http.Get(out.ResultURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "container started") {
		t.Errorf("logs of an instance without onstart: %d %q", resp.StatusCode, b)
	}
}

// TestLaunchRecycleUpdateTemplates: launch instance rents the best offer
// its search finds; recycle boots it again from a fresh pull; update
// instance changes its image and recycles; search templates filters the
// catalogue. All over HTTP, in the bodies vast.py sends.
func TestLaunchRecycleUpdateTemplates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Config{Seed: 12})
	var tpl struct {
		Templates []template `json:"templates"`
	}
	q := "/api/v0/template/?select_cols=" + url.QueryEscape(`["*"]`) + "&select_filters=" + url.QueryEscape(`{"recommended":{"eq":true},"name":{"neq":"x"}}`)
	if st, _, b := h.do("GET", q, nil, &tpl); st != 200 || len(tpl.Templates) != 2 {
		t.Fatalf("search templates: %d %s", st, b)
	}

	cheapest := h.search(`{"rentable":{"eq":true},"num_gpus":{"eq":"1"},"order":[["dph_total","asc"]],"allocated_storage":20,"limit":1}`)[0]
	var launched struct {
		Success     bool  `json:"success"`
		NewContract int64 `json:"new_contract"`
	}
	if st, _, b := h.do("PUT", "/api/v0/launch_instance/", map[string]any{
		"image": "", "disk": 20, "template_hash_id": tpl.Templates[1].HashID, "label": "launched", "cancel_unavail": false,
		"q": map[string]any{"rentable": map[string]any{"eq": true}, "num_gpus": map[string]any{"eq": "1"},
			"order": [][2]string{{"dph_total", "asc"}}, "type": "on-demand", "allocated_storage": 20},
	}, &launched); st != 200 || !launched.Success {
		t.Fatalf("launch instance: %d %s", st, b)
	}
	var s InstanceState
	for _, x := range h.m.State() {
		if x.ID == launched.NewContract {
			s = x
		}
	}
	if s.OfferID != cheapest.ID || s.Label != "launched" {
		t.Fatalf("launched on offer %d (label %q), want the cheapest %d", s.OfferID, s.Label, cheapest.ID)
	}
	id := launched.NewContract
	var ok struct {
		Success bool   `json:"success"`
		Msg     string `json:"msg"`
	}
	// Not loaded yet: recycle refuses.
	if h.do("PUT", fmt.Sprintf("/api/v0/instances/recycle/%d/", id), map[string]any{}, &ok); ok.Success {
		t.Fatal("recycled an instance that has not loaded")
	}
	for i := 0; h.show(id).Status() != "running"; i++ {
		if i > 1000 {
			t.Fatal("never running")
		}
		h.clock.Advance(10 * time.Second)
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/instances/recycle/%d/", id), map[string]any{}, &ok); st != 200 || !ok.Success {
		t.Fatalf("recycle: %d %s", st, b)
	}
	if st := h.show(id).Status(); st != "loading" {
		t.Fatalf("after recycle: %s, want loading", st)
	}
	var upd struct {
		Success         bool        `json:"success"`
		UpdatedInstance InstanceRow `json:"updated_instance"`
	}
	if st, _, b := h.do("PUT", fmt.Sprintf("/api/v0/instances/update_template/%d/", id), map[string]any{"id": id, "image": "pytorch/pytorch:2.3"}, &upd); st != 200 || !upd.Success ||
		upd.UpdatedInstance.ImageUUID != "pytorch/pytorch:2.3" {
		t.Fatalf("update instance: %d %s", st, b)
	}
	for i := 0; h.show(id).Status() != "running"; i++ {
		if i > 1000 {
			t.Fatal("never running after the update")
		}
		h.clock.Advance(10 * time.Second)
	}
}
