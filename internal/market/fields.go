package market

import (
	"math"
	"slices"
)

// fieldKind is how a column compares: numbers (ints and floats), strings, or
// booleans (compared as 0/1 so that "1", true and "True" all work).
type fieldKind uint8

const (
	kindNum fieldKind = iota + 1
	kindStr
	kindBool
)

// field is a typed getter for one offer column. Filters and sorts compile to
// closures over these, so evaluating an offer costs no reflection or lookups.
type field struct {
	kind fieldKind
	num  func(*Offer) float64 // kindNum, and kindBool as 0/1
	str  func(*Offer) string  // kindStr
	bln  func(*Offer) bool    // kindBool
}

func numF(g func(*Offer) float64) field { return field{kind: kindNum, num: g} }
func strF(g func(*Offer) string) field  { return field{kind: kindStr, str: g} }
func boolF(g func(*Offer) bool) field {
	return field{kind: kindBool, bln: g, num: func(o *Offer) float64 { return b2f(g(o)) }}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// offerFields maps every Offer json name, plus the virtual columns country,
// datacenter and verified, to its getter.
var offerFields = map[string]field{
	"id":              numF(func(o *Offer) float64 { return float64(o.ID) }),
	"ask_contract_id": numF(func(o *Offer) float64 { return float64(o.AskContractID) }),
	"bundle_id":       numF(func(o *Offer) float64 { return float64(o.BundleID) }),
	"machine_id":      numF(func(o *Offer) float64 { return float64(o.MachineID) }),
	"host_id":         numF(func(o *Offer) float64 { return float64(o.HostID) }),

	"num_gpus":           numF(func(o *Offer) float64 { return float64(o.NumGPUs) }),
	"gpu_name":           strF(func(o *Offer) string { return o.GPUName }),
	"gpu_ram":            numF(func(o *Offer) float64 { return o.GPURAM }),
	"gpu_total_ram":      numF(func(o *Offer) float64 { return o.GPUTotalRAM }),
	"gpu_frac":           numF(func(o *Offer) float64 { return o.GPUFrac }),
	"gpu_arch":           strF(func(o *Offer) string { return o.GPUArch }),
	"gpu_mem_bw":         numF(func(o *Offer) float64 { return o.GPUMemBW }),
	"gpu_max_power":      numF(func(o *Offer) float64 { return o.GPUMaxPower }),
	"gpu_max_temp":       numF(func(o *Offer) float64 { return o.GPUMaxTemp }),
	"gpu_display_active": boolF(func(o *Offer) bool { return o.GPUDisplayActive }),
	"gpu_lanes":          numF(func(o *Offer) float64 { return float64(o.GPULanes) }),
	"compute_cap":        numF(func(o *Offer) float64 { return float64(o.ComputeCap) }),
	"cuda_max_good":      numF(func(o *Offer) float64 { return o.CUDAMaxGood }),
	"driver_version":     strF(func(o *Offer) string { return o.DriverVersion }),
	"driver_vers":        numF(func(o *Offer) float64 { return float64(o.DriverVers) }),
	"total_flops":        numF(func(o *Offer) float64 { return o.TotalFlops }),
	"dlperf":             numF(func(o *Offer) float64 { return o.DLPerf }),

	"cpu_name":            strF(func(o *Offer) string { return o.CPUName }),
	"cpu_arch":            strF(func(o *Offer) string { return o.CPUArch }),
	"cpu_cores":           numF(func(o *Offer) float64 { return float64(o.CPUCores) }),
	"cpu_cores_effective": numF(func(o *Offer) float64 { return o.CPUCoresEffective }),
	"cpu_ghz":             numF(func(o *Offer) float64 { return o.CPUGHz }),
	"cpu_ram":             numF(func(o *Offer) float64 { return o.CPURAM }),
	"has_avx":             numF(func(o *Offer) float64 { return float64(o.HasAVX) }),
	"mobo_name":           strF(func(o *Offer) string { return o.MoboName }),
	"pci_gen":             numF(func(o *Offer) float64 { return o.PCIGen }),
	"pcie_bw":             numF(func(o *Offer) float64 { return o.PCIeBW }),

	"disk_space":     numF(func(o *Offer) float64 { return o.DiskSpace }),
	"disk_bw":        numF(func(o *Offer) float64 { return o.DiskBW }),
	"disk_name":      strF(func(o *Offer) string { return o.DiskName }),
	"inet_up":        numF(func(o *Offer) float64 { return o.InetUp }),
	"inet_down":      numF(func(o *Offer) float64 { return o.InetDown }),
	"inet_up_cost":   numF(func(o *Offer) float64 { return o.InetUpCost }),
	"inet_down_cost": numF(func(o *Offer) float64 { return o.InetDownCost }),

	"direct_port_count": numF(func(o *Offer) float64 { return float64(o.DirectPortCount) }),
	"public_ipaddr":     strF(func(o *Offer) string { return o.PublicIPAddr }),
	"static_ip":         boolF(func(o *Offer) bool { return o.StaticIP }),
	"os_version":        strF(func(o *Offer) string { return o.OSVersion }),

	"dph_base":            numF(func(o *Offer) float64 { return o.DPHBase }),
	"dph_total":           numF(func(o *Offer) float64 { return o.DPHTotal }),
	"min_bid":             numF(func(o *Offer) float64 { return o.MinBid }),
	"storage_cost":        numF(func(o *Offer) float64 { return o.StorageCost }),
	"storage_total_cost":  numF(func(o *Offer) float64 { return o.StorageTotalCost }),
	"dlperf_per_dphtotal": numF(func(o *Offer) float64 { return o.DLPerfPerDPH }),
	"flops_per_dphtotal":  numF(func(o *Offer) float64 { return o.FlopsPerDPH }),
	"score":               numF(func(o *Offer) float64 { return o.VastScore }),

	"reliability":  numF(func(o *Offer) float64 { return o.Reliability }),
	"reliability2": numF(func(o *Offer) float64 { return o.Reliability2 }),
	"verification": strF(func(o *Offer) string { return o.Verification }),
	"rentable":     boolF(func(o *Offer) bool { return o.Rentable }),
	"rented":       boolF(func(o *Offer) bool { return o.Rented }),
	"is_bid":       boolF(func(o *Offer) bool { return o.IsBid }),
	"external":     boolF(func(o *Offer) bool { return o.External }),
	"vms_enabled":  boolF(func(o *Offer) bool { return o.VMsEnabled }),
	"hosting_type": numF(func(o *Offer) float64 { return float64(o.HostingType) }),
	"geolocation":  strF(func(o *Offer) string { return o.Geolocation }),
	"cluster_id":   numF(func(o *Offer) float64 { return float64(o.ClusterID) }),

	"start_date": numF(func(o *Offer) float64 { return o.StartDate }),
	"end_date":   numF(func(o *Offer) float64 { return o.EndDate }),
	"duration":   numF(func(o *Offer) float64 { return o.Duration }),

	// Virtual columns.
	"country":    strF(func(o *Offer) string { return o.Country() }),
	"datacenter": boolF(func(o *Offer) bool { return o.Datacenter() }),
	"verified":   boolF(func(o *Offer) bool { return o.Verified() }),
}

// serverRename is the server's own column aliases (vast-api.md §4.4). The
// client aliases (dph, cuda_vers, ...) are accepted as well, for callers that
// post a hand-written query.
var serverRename = map[string]string{
	"reliability2":   "reliability",
	"dphtotal":       "dph_total",
	"gpu_totalram":   "gpu_total_ram",
	"ubuntu_version": "os_version",
	"driver_version": "driver_vers",
	"cuda_vers":      "cuda_max_good",
	"dph":            "dph_total",
	"dlperf_usd":     "dlperf_per_dphtotal",
	"flops_usd":      "flops_per_dphtotal",
	"display_active": "gpu_display_active",
}

// serverGB lists the server's GB spellings of MB columns.
var serverGB = map[string]string{
	"cpu_ram_GB":      "cpu_ram",
	"gpu_ram_GB":      "gpu_ram",
	"gpu_totalram_GB": "gpu_total_ram",
}

// lookupField resolves a column by json name first, then by server alias.
func lookupField(name string) (field, bool) {
	if f, ok := offerFields[name]; ok {
		return f, true
	}
	if c, ok := serverRename[name]; ok {
		f, ok := offerFields[c]
		return f, ok
	}
	return field{}, false
}

// FieldValue returns an offer's column by its json name (or a virtual column:
// country, datacenter, verified; "score" is VastScore) as float64, string or
// bool. Server aliases such as dph or ubuntu_version are accepted too.
func FieldValue(o *Offer, name string) (any, bool) {
	f, ok := lookupField(name)
	if !ok {
		return nil, false
	}
	switch f.kind {
	case kindStr:
		return f.str(o), true
	case kindBool:
		return f.bln(o), true
	default:
		return f.num(o), true
	}
}

// FieldNames lists every name FieldValue accepts as a json name (aliases
// excluded), for help text and expression environments.
func FieldNames() []string {
	names := make([]string, 0, len(offerFields))
	for n := range offerFields {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
