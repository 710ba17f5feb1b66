package sim

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/sim/host"
)

// Every address the simulator reports is on this machine's loopback: a
// simulated fleet must never point a tool at someone else's machine.
const loopbackIP = "127.0.0.1"

// hostSyncEvery is how often a served market with hosts looks for
// instances whose state changed without a request observing it. It only
// observes: market decisions are made from the clock, never from it.
const hostSyncEvery = 200 * time.Millisecond

// sshKey is one public key, on the account or attached to an instance.
type sshKey struct {
	ID        int64     `json:"id"`
	Key       string    `json:"ssh_key"`
	CreatedAt time.Time `json:"created_at"`
}

// assignPorts gives a new instance its loopback ports: the proxy route,
// the direct route for direct runtypes, and one per -p port. With hosts the
// ports are free ones the machine will bind; without, they are derived
// from the id and nothing answers on them.
func (m *Market) assignPorts(in *instance) {
	// The kernel may hand a port it just freed to the next reservation:
	// never give one port to two instances, or one's SSH address would
	// reach the other's machine.
	var taken map[int]bool
	if m.hosts != nil {
		taken = map[int]bool{}
		for _, o := range m.st.Instances {
			if o.Destroyed || o == in {
				continue
			}
			taken[o.SSHPort+proxyShift(o.Runtype)], taken[o.DirectPort] = true, true
			for _, p := range o.TCPPorts {
				taken[p] = true
			}
		}
	}
	next := func(k int) int {
		if m.hosts != nil {
			for range 50 {
				p, err := host.ReservePort()
				if err != nil {
					break
				}
				if !taken[p] {
					taken[p] = true
					return p
				}
			}
		}
		return 20000 + int((in.ID*7+int64(k)))%40000
	}
	// vast's proxy serves Jupyter on ssh_port and SSH on ssh_port+1 for
	// jupyter runtypes, and clients add the one (vast-api.md §8).
	in.SSHPort = next(0) - proxyShift(in.Runtype)
	if directRuntype(in.Runtype) {
		in.DirectPort = next(1)
	}
	for i, p := range requestedPorts(in.Env) {
		if in.TCPPorts == nil {
			in.TCPPorts = map[string]int{}
		}
		in.TCPPorts[p] = next(2 + i)
	}
}

func directRuntype(rt string) bool { return strings.Contains(rt, "direc") }

// proxyShift is where SSH sits on the proxy route past ssh_port.
func proxyShift(rt string) int {
	if strings.Contains(rt, "jupyter") {
		return 1
	}
	return 0
}

// requestedPorts are the ports asked with -p in env keys ("-p 8080:8080",
// "-p 9000:9000/udp"), as "8080/tcp", sorted.
func requestedPorts(env map[string]string) []string {
	var out []string
	for k := range env {
		out = append(out, portSpecs(k)...)
	}
	sort.Strings(out)
	return out
}

func portSpecs(key string) []string {
	f := strings.Fields(key)
	var out []string
	for i := 0; i+1 < len(f); i++ {
		if f[i] != "-p" {
			continue
		}
		m := f[i+1]
		proto := "tcp"
		if j := strings.LastIndex(m, "/"); j >= 0 {
			proto, m = m[j+1:], m[:j]
		}
		if j := strings.LastIndex(m, ":"); j >= 0 {
			m = m[j+1:]
		}
		if _, err := strconv.Atoi(m); err == nil && m != "22" {
			out = append(out, m+"/"+proto)
		}
	}
	return out
}

// userEnv is the user's --env values, without the Docker-flag keys (-p,
// -h, ...) that carry ports and options.
func userEnv(env map[string]string) []string {
	var out []string
	for k, v := range env {
		if strings.HasPrefix(k, "-") || k == "" {
			continue
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// vastEnv is what vast injects into every container (run-phase.md §1.1),
// plus VAST_URL: the simulator's API, so that the vastai CLI or a
// dead-man switch inside the instance talks to this market.
func (m *Market) vastEnv(in *instance) []string {
	id := strconv.FormatInt(in.ID, 10)
	o := m.offers[m.byID[in.OfferID]]
	env := []string{
		"CONTAINER_ID=" + id,
		"CONTAINER_API_KEY=" + in.APIKey,
		"VAST_CONTAINERLABEL=C." + id,
		"PUBLIC_IPADDR=" + loopbackIP,
		"GPU_COUNT=" + strconv.Itoa(o.NumGPUs),
	}
	if in.DirectPort > 0 {
		env = append(env, "VAST_TCP_PORT_22="+strconv.Itoa(in.DirectPort))
	}
	for _, p := range requestedPorts(in.Env) {
		num, proto, _ := strings.Cut(p, "/")
		env = append(env, fmt.Sprintf("VAST_%s_PORT_%s=%d", strings.ToUpper(proto), num, in.TCPPorts[p]))
	}
	if len(in.Keys) > 0 {
		env = append(env, "SSH_PUBLIC_KEY="+in.Keys[0].Key)
	}
	if m.apiURL != "" {
		env = append(env, "VAST_URL="+m.apiURL)
	}
	return env
}

func (in *instance) keyLines() []string {
	out := make([]string, 0, len(in.Keys))
	for _, k := range in.Keys {
		out = append(out, k.Key)
	}
	return out
}

// sshOpen is when the instance starts accepting its keys: a SSHLate fault
// makes authentication fail for a while after running, as vast's gateway
// warns ("try again after a few seconds").
func (in *instance) sshOpen() time.Time { return in.RunningAt.Add(in.SSHLate) }

// syncHosts brings the machines in line with the market: running
// instances run, others do not, destroyed ones lose their directory. It is
// called with m.mu held after every change of state.
func (m *Market) syncHosts(now time.Time) {
	if m.hosts == nil {
		return
	}
	for _, in := range m.st.Instances {
		if in.Destroyed {
			if !in.HostGone {
				m.stopLiar(in.ID)
				delete(m.booted, in.ID)
				if err := m.hosts.Destroy(in.ID); err != nil {
					m.log.Warn("sim: removing instance directory", "id", in.ID, "err", err)
				}
				in.HostGone = true
			}
			continue
		}
		starts, up := m.booted[in.ID]
		want := in.Status == "running"
		open := !now.Before(in.sshOpen())
		switch {
		case want && (!up || starts != in.Starts):
			m.boot(in, open)
		case want && up && open && !m.keysOpen[in.ID]:
			m.hosts.SetKeys(in.ID, in.keyLines())
			m.keysOpen[in.ID] = true
		case !want && up:
			dark := host.Refuse
			if in.Status == "offline" && in.DarkHang {
				dark = host.Hang
			}
			m.hosts.Stop(in.ID, dark)
			m.stopLiar(in.ID)
			delete(m.booted, in.ID)
		}
	}
}

func (m *Market) boot(in *instance, open bool) {
	keys := in.keyLines()
	if !open {
		keys = nil
	}
	ports := []int{in.SSHPort + proxyShift(in.Runtype)}
	if in.DirectPort > 0 {
		ports = append(ports, in.DirectPort)
	}
	bound, err := m.hosts.Boot(host.Spec{
		ID: in.ID, Env: append(m.vastEnv(in), userEnv(in.Env)...), SessionEnv: m.vastEnv(in),
		Onstart: in.Onstart, Keys: keys, Ports: ports,
		Hang: in.SSHHang, DropAfter: in.SSHDrop, FailOnstart: in.OnstartFail,
		Hardware: m.hardware(m.offers[m.byID[in.OfferID]]),
		Link:     m.link(in),
	})
	if err != nil {
		m.log.Warn("sim: booting instance host", "id", in.ID, "err", err)
		return
	}
	// A reserved port taken meanwhile moved; the listing shows where.
	in.SSHPort = bound[0] - proxyShift(in.Runtype)
	if in.DirectPort > 0 {
		in.DirectPort = bound[1]
	}
	m.booted[in.ID] = in.Starts
	m.keysOpen[in.ID] = open
	if m.lies(in) {
		m.startLiar(in, m.hosts.Dir(in.ID))
	}
}

// link is the instance's machine's network link, when links are paced.
func (m *Market) link(in *instance) host.Link {
	if !m.cfg.Links {
		return host.Link{}
	}
	o := &m.offers[m.byID[in.OfferID]]
	return host.Link{DownMbps: o.InetDown, UpMbps: o.InetUp}
}

// runHostSync observes the clock for a served market, so that instances
// boot when they turn running even if no request looks at them.
func (m *Market) runHostSync(ctx context.Context) {
	if m.hosts == nil {
		return
	}
	t := time.NewTicker(hostSyncEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.mu.Lock()
			now := m.cfg.Clock.Now()
			m.advance(now)
			m.syncHosts(now)
			m.mu.Unlock()
		}
	}
}

// HostDir is an instance's directory (its /root and /workspace), "" when
// the market runs without hosts.
func (m *Market) HostDir(id int64) string {
	if m.hosts == nil {
		return ""
	}
	return m.hosts.Dir(id)
}

// Sync applies every state change due by now to the instances' machines;
// a served market does it on its own.
func (m *Market) Sync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	m.advance(now)
	m.syncHosts(now)
}
