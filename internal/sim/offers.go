package sim

import (
	"math"
	"math/rand/v2"
)

// DefaultOffers is the size of the default offer population.
const DefaultOffers = 6000

// bigHostShare is the share of mid-range cards sitting in a 64–512 thread host.
var bigHostShare = 0.07399

// What a host asks per vCPU, as vCPUs per $/hr (the score of a $/vCPU
// ranking): Pareto-distributed above cpuScoreMin with tail index
// cpuScoreTail, so that a few hosts sell vCPUs very cheaply and each rank
// further down the ranking costs more, as the published depth table falls
// (about 600 vCPU per $/hr at rank 10, 330 at 100, 160 at 300); capped at
// cpuScoreHi for small boxes and cpuScoreBigHi for 100+ thread servers,
// whose best deals are rarer. A host's RAM per vCPU (ramPerCoreRef is the
// typical GB) raises its price by its power ramPriceExp.
//
// These figures and those below were fitted together so that each cell of
// PublishedDepth is right on average over seeds 1–20 (the top 300's $/hr
// −6% on average, against −24% before), with every cell of seeds 1–5
// within ±30%. One seed's top 10 or 30 is a handful of offers and moves
// by about ±20% from seed to seed around that average.
var (
	cpuScoreMin, cpuScoreTail = 187.3, 2.061
	cpuScoreHi, cpuScoreBigHi = 693.6, 510.0
	ramPerCoreRef             = 1.952
	ramPriceExp               = 0.6294
	// goldenStep spreads a sequence evenly over [0, 1).
	goldenStep = 0.6180339887498949
	// cpuRichPerGPU is how many vCPUs per card make a host price by its
	// threads, and cpuRichCardShare what its card alone then fetches.
	cpuRichPerGPU, cpuRichCardShare  = 20.99, 0.2734
	ramPerCoreLo, ramPerCoreHi       = 1.522, 17.77
	bigRAMPerCoreLo, bigRAMPerCoreHi = 3.071, 3.964
)

// gpuProfile is how the generator draws one GPU model: how common it is, its
// median on-demand price per GPU-hour (calibrated to market-facts.md) and its
// hardware facts.
type gpuProfile struct {
	name       string
	weight     float64
	price      float64 // median $/GPU-hour
	cc         int     // compute capability ×100
	tflops     float64 // FP16-ish TFLOPS per GPU, as vast's total_flops
	datacenter bool    // datacenter card: more GPUs per offer, better hosts
}

// gpuHardware is what the listings say of each card: its memory in MB (MiB,
// as vast reports it) and a relative speed (RTX 3090 = 1) that sets the
// listing's dlperf, memory bandwidth and power limit.
var gpuHardware = map[string]struct{ vramMB, speed float64 }{
	"GTX 1060": {6144, 0.15}, "GTX 1070": {8192, 0.2}, "GTX 1080 Ti": {11264, 0.3},
	"RTX 2070": {8192, 0.4}, "RTX 2080 Ti": {11264, 0.6},
	"RTX 3060": {12288, 0.5}, "RTX 3060 Ti": {8192, 0.55}, "RTX 3070": {8192, 0.6},
	"RTX 3080": {10240, 0.8}, "RTX 3080 Ti": {12288, 0.9}, "RTX 3090": {24576, 1.0}, "RTX 3090 Ti": {24576, 1.1},
	"RTX 4060 Ti": {16384, 0.55}, "RTX 4070": {12288, 0.8}, "RTX 4080": {16384, 1.25}, "RTX 4090": {24576, 1.6},
	"RTX 5090": {32768, 2.2}, "RTX A4000": {16384, 0.6}, "RTX A5000": {24576, 0.9}, "RTX A6000": {49152, 1.1},
	"RTX 6000Ada": {49152, 1.7}, "Tesla V100": {16384, 0.8}, "A10": {24576, 0.7}, "L4": {24576, 0.6},
	"A40": {49152, 1.0}, "L40": {49152, 1.4}, "L40S": {49152, 1.5},
	"A100 PCIE": {40960, 1.8}, "A100 SXM4": {81920, 2.0}, "H100 PCIE": {81920, 2.6}, "H100 SXM": {81920, 3.3}, "H200": {143360, 3.6},
}

// nvlinkGBps is the NVLink bandwidth between the GPUs of an SXM board;
// other cards talk over PCIe (bw_nvlink 0).
var nvlinkGBps = map[string]float64{"A100 SXM4": 600, "H100 SXM": 900, "H200": 900}

var gpuProfiles = []gpuProfile{
	{"GTX 1060", 3, 0.05, 610, 4.4, false},
	{"GTX 1070", 2, 0.06, 610, 6.5, false},
	{"GTX 1080 Ti", 2, 0.09, 610, 11, false},
	{"RTX 2070", 2, 0.08, 750, 15, false},
	{"RTX 2080 Ti", 3, 0.12, 750, 26, false},
	{"RTX 3060", 10, 0.045, 860, 13, false},
	{"RTX 3060 Ti", 5, 0.05, 860, 16, false},
	{"RTX 3070", 6, 0.065, 860, 20, false},
	{"RTX 3080", 6, 0.10, 860, 30, false},
	{"RTX 3080 Ti", 3, 0.13, 860, 34, false},
	{"RTX 3090", 12, 0.20, 860, 35.6, false},
	{"RTX 3090 Ti", 2, 0.24, 860, 40, false},
	{"RTX 4060 Ti", 3, 0.08, 890, 22, false},
	{"RTX 4070", 4, 0.12, 890, 29, false},
	{"RTX 4080", 4, 0.18, 890, 48, false},
	{"RTX 4090", 14, 0.29, 890, 82, false},
	{"RTX 5090", 4, 0.55, 1200, 105, false},
	{"RTX A4000", 3, 0.10, 860, 19, false},
	{"RTX A5000", 4, 0.20, 860, 27, false},
	{"RTX A6000", 4, 0.45, 860, 38, false},
	{"RTX 6000Ada", 2, 0.75, 890, 91, true},
	{"Tesla V100", 2, 0.25, 700, 31, true},
	{"A10", 1, 0.25, 860, 31, true},
	{"L4", 1, 0.30, 890, 30, true},
	{"A40", 2, 0.40, 860, 37, true},
	{"L40", 1, 0.70, 890, 90, true},
	{"L40S", 3, 0.80, 890, 91, true},
	{"A100 PCIE", 2, 0.80, 800, 78, true},
	{"A100 SXM4", 4, 0.95, 800, 78, true},
	{"H100 PCIE", 2, 1.60, 900, 200, true},
	{"H100 SXM", 4, 2.10, 900, 267, true},
	{"H200", 1, 2.60, 900, 267, true},
}

type place struct {
	name   string
	weight float64
}

// Roughly the marketplace's spread; CN and HK together are about 8 %.
var places = []place{
	{"Washington, US", 6}, {"California, US", 8}, {"Texas, US", 7}, {"Oregon, US", 3},
	{"Virginia, US", 5}, {"New York, US", 4}, {"Florida, US", 3}, {"Illinois, US", 3},
	{"Georgia, US", 2}, {"Nevada, US", 2}, {"Utah, US", 2}, {"Ohio, US", 2},
	{"Quebec, CA", 3}, {"Ontario, CA", 3}, {"British Columbia, CA", 2},
	{"Bavaria, DE", 3}, {"Hesse, DE", 3}, {"North Holland, NL", 3}, {"Ile-de-France, FR", 2},
	{"England, GB", 3}, {"Stockholm, SE", 2}, {"Oslo, NO", 1}, {"Uusimaa, FI", 1},
	{"Masovia, PL", 2}, {"Prague, CZ", 2}, {"Madrid, ES", 1}, {"Lombardy, IT", 1},
	{"Bucharest, RO", 1}, {"Kyiv, UA", 1}, {"Tokyo, JP", 2}, {"Seoul, KR", 2},
	{"Taipei, TW", 2}, {"New South Wales, AU", 1}, {"Sao Paulo, BR", 1}, {"Maharashtra, IN", 1},
	{"Ho Chi Minh, VN", 1}, {"Singapore, SG", 1}, {"Johor, MY", 1},
	{"Guangdong, CN", 3}, {"Beijing, CN", 2}, {"Zhejiang, CN", 1}, {"Hong Kong, HK", 2},
}

func pickWeighted[T any](r *rand.Rand, items []T, w func(T) float64) T {
	total := 0.0
	for _, it := range items {
		total += w(it)
	}
	x := r.Float64() * total
	for _, it := range items {
		x -= w(it)
		if x < 0 {
			return it
		}
	}
	return items[len(items)-1]
}

// logUniform draws from [lo, hi] uniformly in log space.
func logUniform(r *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + r.Float64()*(math.Log(hi)-math.Log(lo)))
}

// GenerateOffers builds a deterministic offer population for seed. Prices,
// sizes and host quality follow market-facts.md; the cheap end is dominated
// by consumer cards, a few of them on very large hosts (which is what makes
// $/vCPU hunting pay). Prices are on-demand with 5 GiB storage included in
// dph_total; the search recomputes them for the query's allocated_storage.
func GenerateOffers(seed int64, n int) []Offer {
	if n <= 0 {
		n = DefaultOffers
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x5eedfa11))
	// A machine's place in the distribution of what hosts ask per vCPU is
	// spread evenly within its class (big servers, other hosts) by a
	// golden-ratio sequence from a seeded start, so that every seed has
	// its handful of very cheap hosts of each kind rather than none or
	// twenty: the top of a $/vCPU ranking is a few offers, and a lottery
	// there would make one seed's market unlike another's.
	var quantile [2]float64
	for i := range quantile {
		quantile[i] = r.Float64()
	}
	offers := make([]Offer, 0, n)
	machineID := int64(10000 + r.IntN(5000))
	for i, machines := 0, 0; machines < n; i, machines = i+1, machines+1 {
		g := pickWeighted(r, gpuProfiles, func(p gpuProfile) float64 { return p.weight })
		model := gpuHardware[g.name]
		o := Offer{ID: int64(1000000 + i*7 + r.IntN(7))}
		o.AskContractID = o.ID
		o.BundleID = o.ID + 50000000
		machineID += int64(1 + r.IntN(40))
		o.MachineID = machineID
		o.HostID = int64(1000 + r.IntN(90000))

		// GPUs: consumer cards are mostly single, datacenter cards come in 8s.
		var counts []int
		var cw []float64
		if g.datacenter {
			counts, cw = []int{1, 2, 4, 8}, []float64{35, 15, 20, 30}
		} else {
			counts, cw = []int{1, 2, 4, 8}, []float64{72, 14, 9, 5}
		}
		k := pickWeighted(r, []int{0, 1, 2, 3}, func(j int) float64 { return cw[j] })
		o.NumGPUs = counts[k]
		machGPUs := o.NumGPUs
		if machGPUs < 8 && r.Float64() < 0.35 {
			machGPUs *= 2
		}
		o.GPUFrac = float64(o.NumGPUs) / float64(machGPUs)
		o.GPUName = g.name
		o.GPURAM = model.vramMB
		o.GPUTotalRAM = model.vramMB * float64(o.NumGPUs)
		o.GPUArch = "nvidia"
		o.GPUMemBW = math.Round(300 + 3000*model.speed/3.6)
		o.GPUMaxPower = math.Round(150 + 120*model.speed)
		o.GPUMaxTemp = 83
		o.GPULanes = 16
		o.ComputeCap = g.cc

		// Host: datacenter hosts are big, consumer hosts mostly small with
		// the odd mid-range card in a 128–512 thread server.
		var perGPU float64
		big := false
		switch {
		case g.datacenter:
			perGPU = logUniform(r, 8, 32)
		case g.price >= 0.09 && g.price <= 0.3 && r.Float64() < bigHostShare:
			big = true
		default:
			perGPU = logUniform(r, 4, 16)
			if o.NumGPUs > 1 || r.Float64() < 0.25 {
				perGPU = logUniform(r, 12, 32)
			}
		}
		var eff float64
		if big {
			// One or a few cards of a 4–8 GPU server with 128–512 threads.
			if machGPUs < 4 {
				machGPUs = []int{1, 2, 4, 4, 8, 8}[r.IntN(6)]
				if machGPUs < o.NumGPUs {
					machGPUs = o.NumGPUs
				}
				o.GPUFrac = float64(o.NumGPUs) / float64(machGPUs)
			}
			eff = float64([]int{128, 128, 192, 256, 384, 512}[r.IntN(6)]) * o.GPUFrac
		} else {
			eff = math.Max(2, math.Round(perGPU*float64(o.NumGPUs)))
		}
		eff = math.Round(eff)
		o.CPUCoresEffective = eff
		o.CPUCores = int(math.Round(eff / o.GPUFrac))
		o.CPUName = []string{"AMD EPYC 7742 64-Core Processor", "AMD Ryzen 9 5950X 16-Core Processor", "Intel Xeon Gold 6248R", "AMD Ryzen Threadripper PRO 3975WX", "Intel Core i9-12900K", "AMD EPYC 9654 96-Core Processor"}[r.IntN(6)]
		o.CPUArch = "amd64"
		o.CPUGHz = math.Round((2.2+r.Float64()*2.8)*10) / 10
		ramPerCore := logUniform(r, ramPerCoreLo, ramPerCoreHi)
		if big {
			ramPerCore = logUniform(r, bigRAMPerCoreLo, bigRAMPerCoreHi) // servers carry more memory per thread
		}
		o.CPURAM = math.Round(eff*ramPerCore) * 1024
		if o.CPURAM < 8192 {
			o.CPURAM = 8192
		}
		o.HasAVX = 1
		o.MoboName = "Generic Board"
		o.PCIGen = []float64{3, 4, 4, 5}[r.IntN(4)]
		o.PCIeBW = math.Round(o.PCIGen*3*10) / 10

		o.DiskSpace = math.Round(logUniform(r, 40, 4000))
		o.DiskBW = math.Round(logUniform(r, 300, 6000))
		o.DiskName = "nvme"
		// Bandwidth is log-ish over 10–10000 Mb/s; datacenters sit high.
		lo := 10.0
		if g.datacenter {
			lo = 300
		}
		o.InetDown = math.Round(logUniform(r, lo, 10000)*10) / 10
		o.InetUp = math.Round(o.InetDown*(0.3+0.8*r.Float64())*10) / 10
		o.InetUpCost = math.Round(logUniform(r, 0.001, 0.02)*1e4) / 1e4
		o.InetDownCost = math.Round(logUniform(r, 0.001, 0.02)*1e4) / 1e4
		o.DirectPortCount = []int{0, 20, 100, 500, 1000}[r.IntN(5)]
		// Every simulated host is this machine. The four draws that once
		// made up a public address stay, so a seed gives the same market.
		_, _, _, _ = r.IntN(200), r.IntN(256), r.IntN(256), r.IntN(254)
		o.PublicIPAddr = "127.0.0.1"
		o.StaticIP = r.Float64() < 0.6
		o.OSVersion = []string{"20.04", "22.04", "22.04", "24.04"}[r.IntN(4)]
		drv := []struct {
			v    string
			n    int64
			cuda float64
		}{{"535.104.05", 535104005, 12.2}, {"545.29.06", 545029006, 12.3}, {"550.54.15", 550054015, 12.4}, {"560.35.03", 560035003, 12.6}, {"570.86.10", 570086010, 12.8}}[r.IntN(5)]
		if g.cc >= 1200 {
			drv.v, drv.n, drv.cuda = "570.86.10", 570086010, 12.8
		}
		o.DriverVersion, o.DriverVers, o.CUDAMaxGood = drv.v, drv.n, drv.cuda

		o.Geolocation = pickWeighted(r, places, func(p place) float64 { return p.weight }).name
		o.HostingType = 0
		if g.datacenter && r.Float64() < 0.6 || r.Float64() < 0.05 {
			o.HostingType = 1
		}
		o.Verification = "verified"
		if r.Float64() < 0.3 {
			o.Verification = "unverified"
		} else if r.Float64() < 0.03 {
			o.Verification = "deverified"
		}
		o.VMsEnabled = r.Float64() < 0.2
		o.Rentable = true
		o.External = false

		// Price: lognormal spread around the model's median; cheaper hosts
		// tend to be less reliable.
		spread := math.Exp(r.NormFloat64() * 0.28)
		// Hosts rarely go below about 3 cents a GPU-hour.
		perGPUPrice := math.Max(g.price*spread, math.Min(0.03, g.price))
		// No host sells a vCPU-hour for much under $0.0013 (the best ~750
		// vCPU per $/h seen on the market).
		hi := cpuScoreHi
		if eff > 100 {
			hi = cpuScoreBigHi
		}
		class := 0
		if big {
			class = 1
		}
		quantile[class] = math.Mod(quantile[class]+goldenStep, 1)
		q := quantile[class]
		score := math.Min(hi, cpuScoreMin*math.Pow(1-q, -1/cpuScoreTail)) / math.Pow(ramPerCore/ramPerCoreRef, ramPriceExp)
		// A host with many threads per card prices by its threads: it
		// lets the card go below the model's going rate (a 128-thread box
		// with a 3090 at $0.17/h), where a bare card is priced as a card.
		floor := perGPUPrice * float64(o.NumGPUs)
		if eff/float64(o.NumGPUs) >= cpuRichPerGPU {
			floor *= cpuRichCardShare
		}
		o.DPHBase = round4(math.Max(floor, eff/score))
		o.MinBid = round4(o.DPHBase * (0.35 + 0.4*r.Float64()))
		o.StorageCost = math.Round(logUniform(r, 0.05, 0.3)*1000) / 1000
		rel := 0.95 + 0.045*r.Float64()
		if spread < 0.85 {
			rel -= 0.1 * r.Float64()
		}
		if r.Float64() < 0.06 {
			rel = 0.80 + 0.15*r.Float64()
		}
		o.Reliability = math.Round(math.Min(0.999, math.Max(0.80, rel))*10000) / 10000
		o.Reliability2 = o.Reliability
		o.TotalFlops = math.Round(g.tflops*float64(o.NumGPUs)*10) / 10
		o.DLPerf = math.Round(model.speed*25*float64(o.NumGPUs)*100) / 100
		o.Duration = math.Round(logUniform(r, 3, 180) * 86400)
		derive(&o)
		PriceOffer(&o, 5, false)
		offers = append(offers, o)
		// The odd card in a big server is that server's one listing (its
		// owner rents the rest of it otherwise); other multi-GPU machines
		// often list slices.
		if big {
			continue
		}
		for _, sib := range siblings(seed, o, machGPUs) {
			i++
			sib.ID = int64(1000000 + i*7 + int(sib.ID))
			sib.AskContractID, sib.BundleID = sib.ID, sib.ID+50000000
			offers = append(offers, sib)
		}
	}
	return offers
}

// siblingShare is the share of multi-GPU machines that list their GPUs as
// several offers (1, 2, 4 and 8-GPU slices, as vast does) rather than one.
var siblingShare = 0.6

// siblings are the other slices a machine with machGPUs GPUs lists beside
// o: the same machine, host and reliability, with GPUs, vCPUs, RAM, disk
// and price in proportion. Their own generator keeps the main stream, and
// so every other offer, as it was. Each sibling's ID holds only its offset
// (0–6) within its slot; the caller places it.
func siblings(seed int64, o Offer, machGPUs int) []Offer {
	if machGPUs <= o.NumGPUs {
		return nil
	}
	r := rand.New(rand.NewPCG(uint64(seed)^0x51b11a95, uint64(o.MachineID)))
	if r.Float64() >= siblingShare {
		return nil
	}
	var out []Offer
	for _, n := range []int{1, 2, 4, 8} {
		if n > machGPUs || n == o.NumGPUs {
			continue
		}
		k := float64(n) / float64(o.NumGPUs)
		s := o
		s.ID = int64(r.IntN(7))
		s.NumGPUs = n
		s.GPUFrac = float64(n) / float64(machGPUs)
		s.GPUTotalRAM = o.GPURAM * float64(n)
		s.CPUCoresEffective = math.Max(1, math.Round(o.CPUCoresEffective*k))
		s.CPURAM = math.Max(8192, math.Round(o.CPURAM*k/1024)*1024)
		s.DiskSpace = math.Max(20, math.Round(o.DiskSpace*k))
		s.DPHBase = round4(o.DPHBase * k)
		if s.CPUCoresEffective > 100 && o.CPUCoresEffective <= 100 {
			s.DPHBase = round4(s.DPHBase / 0.78) // big boxes ask more per vCPU, as in GenerateOffers
		}
		s.MinBid = round4(o.MinBid * k)
		s.TotalFlops = math.Round(o.TotalFlops*k*10) / 10
		s.DLPerf = math.Round(o.DLPerf*k*100) / 100
		derive(&s)
		PriceOffer(&s, 5, false)
		out = append(out, s)
	}
	return out
}

// MachineGPUs is the number of GPUs on the offer's machine.
func MachineGPUs(o *Offer) int {
	if o.GPUFrac <= 0 {
		return o.NumGPUs
	}
	return int(math.Round(float64(o.NumGPUs) / o.GPUFrac))
}

// derive fills the columns that follow from the others, without a draw (a
// seed's market stays as it was): NVLink between an SXM board's GPUs, the
// bandwidth prices per TB, and the reliability vast expects (taken as the
// listed one: the simulator has no history to adjust it by).
func derive(o *Offer) {
	o.BWNVLink = 0
	if o.NumGPUs > 1 {
		o.BWNVLink = nvlinkGBps[o.GPUName]
	}
	o.InetUpCostTB, o.InetDownCostTB = o.InetUpCost*1000, o.InetDownCost*1000
	o.ExpectedReliability, o.ReliabilityMult = o.Reliability, 1
	o.ResourceType = "gpu"
}

// PriceOffer recomputes the offer's price columns for allocated GiB of disk:
// dph_total = compute (dph_base, or min_bid for bid searches) + storage.
func PriceOffer(o *Offer, allocated float64, bid bool) {
	o.StorageTotalCost = storageRate(o.StorageCost, allocated)
	compute := o.DPHBase
	if bid {
		compute = o.MinBid
	}
	o.IsBid = bid
	o.DPHTotal = compute + o.StorageTotalCost
	if o.DPHTotal > 0 {
		o.DLPerfPerDPH = o.DLPerf / o.DPHTotal
		o.FlopsPerDPH = o.TotalFlops / o.DPHTotal
		o.Score = o.DLPerf / o.DPHTotal * o.Reliability
	}
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }
