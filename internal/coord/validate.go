package coord

import (
	"bytes"
	"fmt"
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/vastfleet/vastfleet/internal/wire"
)

// Limits on what an agent may send. They bound the memory a leaked agent
// token can make the coordinator hold, far above what a real node reports.
const (
	maxNameLen       = 128
	maxKeyLen        = 256
	maxMetricNameLen = 64
	maxMetrics       = 256
	maxSessions      = 256
	maxGPUs          = 64
	maxBatch         = 1000
	maxNodesPerFleet = 20000
	recentFindings   = 50
	maxPercent       = 1e7 // 100,000 cores at 100 %
)

// validName accepts printable UTF-8 of 1..maxNameLen bytes: names reach
// the dashboard, logs and Prometheus labels.
func validName(what, s string) error {
	return validText(what, s, maxNameLen)
}

func validText(what, s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > max:
		return fmt.Errorf("%s is longer than %d bytes", what, max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%s contains the non-printable character %U", what, r)
		}
	}
	return nil
}

func validNumber(what string, v, min, max float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v < min || v > max {
		return fmt.Errorf("%s = %v is out of range [%g, %g]", what, v, min, max)
	}
	return nil
}

// validateHeartbeat checks what the dashboard and the totals rely on.
func validateHeartbeat(hb *wire.Heartbeat) error {
	if err := validName("node", hb.Node); err != nil {
		return err
	}
	if hb.InstanceID < 0 {
		return fmt.Errorf("instance_id = %d is negative", hb.InstanceID)
	}
	if err := validNumber("cpu_percent", hb.CPUPercent, 0, maxPercent); err != nil {
		return err
	}
	if err := validNumber("cpu_cores", hb.CPUCores, 0, maxPercent/100); err != nil {
		return err
	}
	if err := validNumber("uptime_s", hb.UptimeS, 0, math.MaxFloat64); err != nil {
		return err
	}
	for _, f := range []struct {
		what      string
		used, tot int64
	}{{"ram", hb.RAMUsedBytes, hb.RAMTotalBytes}, {"disk", hb.DiskUsedBytes, hb.DiskTotalBytes}} {
		if f.used < 0 || f.tot < 0 {
			return fmt.Errorf("%s bytes are negative", f.what)
		}
	}
	if len(hb.GPUs) > maxGPUs {
		return fmt.Errorf("%d GPUs is more than %d", len(hb.GPUs), maxGPUs)
	}
	for i, g := range hb.GPUs {
		if err := validNumber(fmt.Sprintf("gpus[%d].util_percent", i), g.UtilPercent, 0, 100); err != nil {
			return err
		}
		if err := validNumber(fmt.Sprintf("gpus[%d].mem_used_mb", i), g.MemUsedMB, 0, math.MaxFloat64); err != nil {
			return err
		}
		if err := validNumber(fmt.Sprintf("gpus[%d].mem_total_mb", i), g.MemTotalMB, 0, math.MaxFloat64); err != nil {
			return err
		}
	}
	if len(hb.Sessions) > maxSessions {
		return fmt.Errorf("%d sessions is more than %d", len(hb.Sessions), maxSessions)
	}
	for i, s := range hb.Sessions {
		if err := validName(fmt.Sprintf("sessions[%d].name", i), s.Name); err != nil {
			return err
		}
		if err := validText(fmt.Sprintf("sessions[%d].state", i), s.State, 32); err != nil {
			return err
		}
	}
	if len(hb.Metrics) > maxMetrics {
		return fmt.Errorf("%d metrics is more than %d", len(hb.Metrics), maxMetrics)
	}
	for name, v := range hb.Metrics {
		if err := validText("metric name", name, maxMetricNameLen); err != nil {
			return err
		}
		if err := validNumber("metric "+name, v, -math.MaxFloat64, math.MaxFloat64); err != nil {
			return err
		}
	}
	if hb.Stage != "" {
		if err := validText("stage", hb.Stage, 32); err != nil {
			return err
		}
	}
	if hb.Probe != nil {
		return validateProbe(hb.Probe)
	}
	return nil
}

// validateProbe checks a boot probe's figures: what the dashboard and a
// launch judge a node by.
func validateProbe(p *wire.Probe) error {
	if p.Status != wire.ProbeOK && p.Status != wire.ProbeFailed {
		return fmt.Errorf("probe.status %q: want %s or %s", p.Status, wire.ProbeOK, wire.ProbeFailed)
	}
	for _, t := range []struct {
		what string
		v    string
		max  int
	}{{"probe.error", p.Error, 1024}, {"probe.cores_method", p.CoresMethod, 32}, {"probe.gpu_error", p.GPUError, 1024},
		{"probe.download_error", p.DownloadError, 1024}, {"probe.gpu_alloc", p.GPUAlloc, 32}, {"probe.gpu_alloc_error", p.GPUAllocError, 1024}} {
		if t.v == "" {
			continue
		}
		if err := validText(t.what, t.v, t.max); err != nil {
			return err
		}
	}
	for _, n := range []struct {
		what string
		v    float64
	}{{"probe.duration_s", p.DurationS}, {"probe.cores", p.Cores}, {"probe.gpu_mem_mb", p.GPUMemMB},
		{"probe.disk_write_mbps", p.DiskMBps}, {"probe.download_mbps", p.DownloadMBps}, {"probe.gpu_alloc_mb", p.GPUAllocMB}, {"probe.advertised.cores", p.Advertised.Cores},
		{"probe.advertised.ram_mb", p.Advertised.RAMMB}, {"probe.advertised.down_mbps", p.Advertised.DownMbps}} {
		if err := validNumber(n.what, n.v, 0, math.MaxFloat64); err != nil {
			return err
		}
	}
	if p.RAMBytes < 0 || p.RAMTargetBytes < 0 || p.DownloadBytes < 0 || p.GPUAllocGPUs < 0 || p.GPUAllocGPUs > maxGPUs || p.Workers < 0 || p.GPUs < 0 || p.GPUs > maxGPUs || p.Advertised.GPUs < 0 {
		return fmt.Errorf("probe: a negative or too large count")
	}
	if len(p.GPUNames) > maxGPUs {
		return fmt.Errorf("probe: %d GPU names is more than %d", len(p.GPUNames), maxGPUs)
	}
	for i, n := range p.GPUNames {
		if err := validText(fmt.Sprintf("probe.gpu_names[%d]", i), n, 128); err != nil {
			return err
		}
	}
	return nil
}

// validateFindings checks a batch before anything is stored: one bad item
// refuses the whole batch, so the agent's spool never half-drains.
func validateFindings(fs *wire.Findings) error {
	if err := validName("node", fs.Node); err != nil {
		return err
	}
	if fs.InstanceID < 0 {
		return fmt.Errorf("instance_id = %d is negative", fs.InstanceID)
	}
	if len(fs.Items) == 0 {
		return fmt.Errorf("items is empty")
	}
	if len(fs.Items) > maxBatch {
		return fmt.Errorf("%d items is more than %d per batch", len(fs.Items), maxBatch)
	}
	for i, it := range fs.Items {
		if err := validText(fmt.Sprintf("items[%d].key", i), it.Key, maxKeyLen); err != nil {
			return err
		}
		if it.Session != "" {
			if err := validName(fmt.Sprintf("items[%d].session", i), it.Session); err != nil {
				return err
			}
		}
		d := bytes.TrimSpace(it.Data)
		if len(d) == 0 || string(d) == "null" {
			return fmt.Errorf("items[%d].data is missing", i)
		}
	}
	return nil
}
