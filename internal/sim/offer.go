package sim

import "strings"

// Offer is one listing as the simulated server stores and answers it: the
// columns of vast's `offers[]` rows (vast-api.md §5), with vast's names and
// units (RAM in MB, bandwidth in Mb/s, prices in $/hour, storage_cost in
// $/GB/month). It is the simulator's own model, kept apart from the
// client's: a test that compares the two compares two readings of vast's
// documentation, not one struct with itself.
type Offer struct {
	// Identity.
	ID            int64 `json:"id"`
	AskContractID int64 `json:"ask_contract_id"`
	BundleID      int64 `json:"bundle_id"`
	MachineID     int64 `json:"machine_id"`
	HostID        int64 `json:"host_id"`
	ClusterID     int64 `json:"cluster_id,omitempty"`

	// GPUs.
	NumGPUs          int     `json:"num_gpus"`
	GPUName          string  `json:"gpu_name"`
	GPURAM           float64 `json:"gpu_ram"`
	GPUTotalRAM      float64 `json:"gpu_total_ram"`
	GPUFrac          float64 `json:"gpu_frac"`
	GPUArch          string  `json:"gpu_arch"`
	GPUMemBW         float64 `json:"gpu_mem_bw"`
	GPUMaxPower      float64 `json:"gpu_max_power"`
	GPUMaxTemp       float64 `json:"gpu_max_temp"`
	GPUDisplayActive bool    `json:"gpu_display_active"`
	GPULanes         int     `json:"gpu_lanes"`
	BWNVLink         float64 `json:"bw_nvlink"` // GB/s between the offer's GPUs; 0 over PCIe
	ComputeCap       int     `json:"compute_cap"`
	CUDAMaxGood      float64 `json:"cuda_max_good"`
	DriverVersion    string  `json:"driver_version"`
	DriverVers       int64   `json:"driver_vers"`
	TotalFlops       float64 `json:"total_flops"`
	DLPerf           float64 `json:"dlperf"`

	// Host.
	CPUName           string  `json:"cpu_name"`
	CPUArch           string  `json:"cpu_arch"`
	CPUCores          int     `json:"cpu_cores"`
	CPUCoresEffective float64 `json:"cpu_cores_effective"`
	CPUGHz            float64 `json:"cpu_ghz"`
	CPURAM            float64 `json:"cpu_ram"`
	HasAVX            int     `json:"has_avx"`
	MoboName          string  `json:"mobo_name"`
	PCIGen            float64 `json:"pci_gen"`
	PCIeBW            float64 `json:"pcie_bw"`
	DiskSpace         float64 `json:"disk_space"`
	DiskBW            float64 `json:"disk_bw"`
	DiskName          string  `json:"disk_name"`
	OSVersion         string  `json:"os_version"`
	VMsEnabled        bool    `json:"vms_enabled"`

	// Network.
	InetUp          float64 `json:"inet_up"`
	InetDown        float64 `json:"inet_down"`
	InetUpCost      float64 `json:"inet_up_cost"`
	InetDownCost    float64 `json:"inet_down_cost"`
	InetUpCostTB    float64 `json:"internet_up_cost_per_tb"`
	InetDownCostTB  float64 `json:"internet_down_cost_per_tb"`
	DirectPortCount int     `json:"direct_port_count"`
	PublicIPAddr    string  `json:"public_ipaddr"`
	StaticIP        bool    `json:"static_ip"`

	// Prices: set per search by PriceOffer (dph_total includes storage
	// for the search's allocated_storage).
	DPHBase          float64 `json:"dph_base"`
	DPHTotal         float64 `json:"dph_total"`
	MinBid           float64 `json:"min_bid"`
	StorageCost      float64 `json:"storage_cost"`
	StorageTotalCost float64 `json:"storage_total_cost"`
	DLPerfPerDPH     float64 `json:"dlperf_per_dphtotal"`
	FlopsPerDPH      float64 `json:"flops_per_dphtotal"`
	Score            float64 `json:"score"`

	// Standing.
	Reliability         float64 `json:"reliability"`
	Reliability2        float64 `json:"reliability2"`
	ExpectedReliability float64 `json:"expected_reliability"`
	ReliabilityMult     float64 `json:"reliability_mult"`
	Verification        string  `json:"verification"`
	Rentable            bool    `json:"rentable"`
	Rented              bool    `json:"rented"`
	IsBid               bool    `json:"is_bid"`
	External            bool    `json:"external"`
	HostingType         int     `json:"hosting_type"`
	Geolocation         string  `json:"geolocation"`
	ResourceType        string  `json:"resource_type"`

	StartDate float64 `json:"start_date"`
	EndDate   float64 `json:"end_date"`
	Duration  float64 `json:"duration"`
}

// country is the two-letter code vast filters geolocation on: the last
// word of "Washington, US".
func (o *Offer) country() string {
	g := strings.TrimSpace(o.Geolocation)
	if i := strings.LastIndexAny(g, ", "); i >= 0 {
		return g[i+1:]
	}
	return g
}
