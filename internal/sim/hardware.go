package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// Capacity is what a machine truly has beside what its offers advertise.
// Honest machines have what they advertise. A share Faults.Spoof of
// machines, drawn per machine from the seed, is short: 25–50 % of its
// effective cores, half its RAM, and half its GPUs (rounded up) when it
// advertises more than one. The simulated machine behaves accordingly
// (sim/host's Hardware): its processes run only TrueCores/Cores of the
// time and its nvidia-smi lists its true GPUs; under Config.CapacityScale
// its workload runs at TrueCores/CapacityScale of one of this computer's
// cores, an honest machine's at Cores/CapacityScale.
type Capacity struct {
	Spoofed   bool    `json:"spoofed"`
	Cores     float64 `json:"cores"`      // advertised effective cores
	TrueCores float64 `json:"true_cores"` //
	RAMMB     float64 `json:"ram_mb"`
	TrueRAMMB float64 `json:"true_ram_mb"`
	GPUs      int     `json:"gpus"`
	TrueGPUs  int     `json:"true_gpus"`
}

// capacity draws the machine of offer o's true capacity.
func (m *Market) capacity(o Offer) Capacity {
	c := Capacity{Cores: o.CPUCoresEffective, TrueCores: o.CPUCoresEffective,
		RAMMB: o.CPURAM, TrueRAMMB: o.CPURAM, GPUs: o.NumGPUs, TrueGPUs: o.NumGPUs}
	seed := m.st.Seed
	if draw(seed, drawSpoof, o.MachineID, 0) >= m.cfg.Faults.Spoof {
		return c
	}
	c.Spoofed = true
	share := 0.25 + 0.25*draw(seed, drawSpoof, o.MachineID, 1)
	c.TrueCores = math.Max(1, math.Round(c.Cores*share*10)/10)
	if c.TrueCores >= c.Cores {
		c.TrueCores = c.Cores / 2
	}
	c.TrueRAMMB = math.Round(c.RAMMB / 2)
	if c.GPUs > 1 {
		c.TrueGPUs = (c.GPUs + 1) / 2
	}
	return c
}

// Capacity is the true capacity of the machine behind an offer.
func (m *Market) Capacity(offerID int64) (Capacity, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, ok := m.byID[offerID]
	if !ok {
		return Capacity{}, false
	}
	return m.capacity(m.offers[i]), true
}

// hardware is what the instance's machine is given to behave as.
func (m *Market) hardware(o Offer) host.Hardware {
	c := m.capacity(o)
	hw := host.Hardware{Cores: c.Cores, TrueCores: c.TrueCores, RAMMB: c.RAMMB, TrueRAMMB: c.TrueRAMMB, Scale: m.cfg.CapacityScale}
	for i := range c.TrueGPUs {
		hw.GPUs = append(hw.GPUs, host.GPU{
			Name: smiName(o.GPUName), MemMiB: int(math.Round(o.GPURAM)), Driver: o.DriverVersion,
			UUID: gpuUUID(m.st.Seed, o.MachineID, i),
		})
	}
	return hw
}

// smiName is how nvidia-smi names a GPU vast lists as name.
func smiName(name string) string {
	switch {
	case name == "":
		return "NVIDIA GPU"
	case strings.HasPrefix(name, "RTX") || strings.HasPrefix(name, "GTX"):
		return "NVIDIA GeForce " + name
	case strings.HasPrefix(name, "NVIDIA"):
		return name
	}
	return "NVIDIA " + name
}

// gpuUUID is a stable UUID of a machine's GPU, in nvidia-smi's form.
func gpuUUID(seed, machine int64, i int) string {
	h := splitmix(splitmix(uint64(seed)^uint64(machine)) ^ uint64(i))
	g := splitmix(h)
	return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", uint32(h>>32), uint16(h>>16), uint16(h), uint16(g>>48), g&0xffffffffffff)
}
