// Package market owns offers as the marketplace describes them, the vast.ai
// query language (parse, evaluate, order) and the scores that rank offers.
// It is pure: no network, no disk, no clock.
package market

// Offer is one row of a vast.ai offer search (`POST /api/v0/bundles/`), with
// the API's own field names and units (RAM in MB, bandwidth in Mb/s, prices
// in $/hour). Fields the API sends that vastfleet does not use are dropped.
type Offer struct {
	ID            int64 `json:"id"`
	AskContractID int64 `json:"ask_contract_id,omitempty"`
	BundleID      int64 `json:"bundle_id,omitempty"`
	MachineID     int64 `json:"machine_id"`
	HostID        int64 `json:"host_id"`

	NumGPUs          int     `json:"num_gpus"`
	GPUName          string  `json:"gpu_name"`
	GPURAM           float64 `json:"gpu_ram"`       // MB per GPU
	GPUTotalRAM      float64 `json:"gpu_total_ram"` // MB over all GPUs
	GPUFrac          float64 `json:"gpu_frac"`
	GPUArch          string  `json:"gpu_arch"`
	GPUMemBW         float64 `json:"gpu_mem_bw"`
	GPUMaxPower      float64 `json:"gpu_max_power"`
	GPUMaxTemp       float64 `json:"gpu_max_temp"`
	GPUDisplayActive bool    `json:"gpu_display_active"`
	GPULanes         int     `json:"gpu_lanes"`
	ComputeCap       int     `json:"compute_cap"`
	CUDAMaxGood      float64 `json:"cuda_max_good"`
	DriverVersion    string  `json:"driver_version"`
	DriverVers       int64   `json:"driver_vers"`
	TotalFlops       float64 `json:"total_flops"`
	DLPerf           float64 `json:"dlperf"`

	CPUName           string  `json:"cpu_name"`
	CPUArch           string  `json:"cpu_arch"`
	CPUCores          int     `json:"cpu_cores"`
	CPUCoresEffective float64 `json:"cpu_cores_effective"`
	CPUGHz            float64 `json:"cpu_ghz"`
	CPURAM            float64 `json:"cpu_ram"` // MB
	HasAVX            int     `json:"has_avx"`
	MoboName          string  `json:"mobo_name"`
	PCIGen            float64 `json:"pci_gen"`
	PCIeBW            float64 `json:"pcie_bw"`

	DiskSpace    float64 `json:"disk_space"` // GB
	DiskBW       float64 `json:"disk_bw"`    // MB/s
	DiskName     string  `json:"disk_name"`
	InetUp       float64 `json:"inet_up"`   // Mb/s
	InetDown     float64 `json:"inet_down"` // Mb/s
	InetUpCost   float64 `json:"inet_up_cost"`
	InetDownCost float64 `json:"inet_down_cost"`

	DirectPortCount int    `json:"direct_port_count"`
	PublicIPAddr    string `json:"public_ipaddr"`
	StaticIP        bool   `json:"static_ip"`
	OSVersion       string `json:"os_version"`

	DPHBase          float64 `json:"dph_base"`  // compute $/hour
	DPHTotal         float64 `json:"dph_total"` // compute + storage $/hour
	MinBid           float64 `json:"min_bid"`
	StorageCost      float64 `json:"storage_cost"`       // $/GB/month
	StorageTotalCost float64 `json:"storage_total_cost"` // $/hour for the allocated storage
	DLPerfPerDPH     float64 `json:"dlperf_per_dphtotal"`
	FlopsPerDPH      float64 `json:"flops_per_dphtotal"`
	// VastScore is the marketplace's own "score" column, its default sort key.
	// Ranked output replaces "score" with vastfleet's score.
	VastScore float64 `json:"score"`

	Reliability  float64 `json:"reliability"`
	Reliability2 float64 `json:"reliability2"`
	Verification string  `json:"verification"` // verified, unverified, deverified
	Rentable     bool    `json:"rentable"`
	Rented       bool    `json:"rented"`
	IsBid        bool    `json:"is_bid"`
	External     bool    `json:"external"`
	VMsEnabled   bool    `json:"vms_enabled"`
	HostingType  int     `json:"hosting_type"` // 1 = datacenter
	Geolocation  string  `json:"geolocation"`  // "Washington, US"
	ClusterID    int64   `json:"cluster_id,omitempty"`

	StartDate float64 `json:"start_date"` // epoch seconds
	EndDate   float64 `json:"end_date"`   // epoch seconds
	Duration  float64 `json:"duration"`   // seconds
}

// Country is the two-letter country code at the end of Geolocation
// ("Washington, US" → "US"); the query language filters geolocation on it.
func (o *Offer) Country() string {
	g := o.Geolocation
	for i := len(g) - 1; i >= 0; i-- {
		if g[i] == ',' || g[i] == ' ' {
			return g[i+1:]
		}
	}
	return g
}

// Verified reports whether the host is verified.
func (o *Offer) Verified() bool { return o.Verification == "verified" }

// Datacenter reports whether the host is a datacenter host.
func (o *Offer) Datacenter() bool { return o.HostingType == 1 }
