package sim

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// Faults are the failure shares the simulator injects. Each share is a
// probability in [0,1]; per-request faults are drawn per API request,
// per-instance faults once per instance at create, all from the seed.
type Faults struct {
	// RateLimit, when > 0, is each API key's sustained request rate per
	// market second, with RateBurst requests in hand: a token bucket over
	// the market's clock, so a client that sends faster than it waits gets
	// 429 "API requests too frequent" (plain text). Like Rate429, never
	// applied to v1 listing follow-up pages (after_token present), which
	// the official CLI fetches back to back.
	RateLimit float64
	RateBurst float64
	// EndpointLimits adds vast's per-endpoint limits on top: about one
	// call a market second on most endpoints, search ten a minute
	// (endpointlimits.go).
	EndpointLimits bool
	// Rate429 answers a share of requests 429 at random, on top of the
	// rate limit (to test a client's handling of them).
	Rate429 float64
	// RetryAfter, when > 0, adds a Retry-After header (seconds) to 429s;
	// the real API sends none.
	RetryAfter time.Duration
	// Rate5xx answers 500 or 502 with a body.
	Rate5xx float64
	// LostCreate applies a create and then drops the connection without
	// an answer.
	LostCreate float64
	// AuthAs404 answers a bad key with 404 and the auth_error body (seen
	// in the wild for revoked keys) instead of 401.
	AuthAs404 bool

	// StuckLoading instances never leave loading.
	StuckLoading float64
	// BootFail instances go to exited at their ready time.
	BootFail float64
	// HostOffline instances go offline some time after running.
	HostOffline float64
	// SlowBoot instances pull and unpack their image 5–20× slower: past
	// 10 minutes for a multi-GB image, a few minutes for a small one.
	SlowBoot float64

	// OddRows is the share of offer and instance rows sent in a shape
	// vast has been seen to send: ports as a list, a price as a string,
	// a version as a number, an unknown column, a null (oddrows.go).
	OddRows float64

	// Liars is the share of machines whose operators lie: they read the
	// vastfleet agent's credential off the container's disk and send
	// wrong results, forged findings, results for items never leased and
	// heartbeats in other nodes' names (liar.go).
	Liars float64

	// TakenWhileStopped is the chance, per minute stopped, that another
	// renter takes the GPU so that a later start waits in "Scheduling"
	// until that renter's rental ends (rivalHold).
	TakenWhileStopped float64
	// OfferChurnPerHour is the share of offers rented by others in any
	// one simulated hour (they vanish from search and refuse creates).
	OfferChurnPerHour float64
	// CreateRace is the share of offers taken by someone else between a
	// search and the create in a given hour (create answers no_such_ask).
	CreateRace float64
	// RivalShare is the share of offers on which a rival bids in any one
	// half hour (0: the default, 0.15); a rival above an interruptible
	// instance's bid stops it (bids.go).
	RivalShare float64

	// Last-mile faults, each a share of instances. SSHLate refuses the
	// instance's keys for 5–60 s after it turns running (vast's gateway:
	// "try again after a few seconds"); SSHHang accepts TCP but never
	// answers SSH; SSHDrop drops every connection after 8–72 KiB; and
	// OnstartFail replaces the onstart with one that exits 1.
	SSHLate     float64
	SSHHang     float64
	SSHDrop     float64
	OnstartFail float64
	// DarkHang is the share of hosts gone offline whose SSH port hangs
	// instead of refusing.
	DarkHang float64

	// Spoof is the share of machines whose true capacity is below what
	// their offers advertise (hardware.go): a quarter to half of the
	// effective cores, and on a multi-GPU machine half the GPUs. Drawn
	// per machine, so every offer and rental of one machine agrees.
	Spoof float64
}

// Profile returns a named fault profile: "none", "realistic" or "harsh".
//
// "realistic" follows market-facts.md: of 300 launches about 73 % had
// booted after 10 minutes, so 10 % never boot (half stuck in loading, half
// exiting) and 20 % boot slowly, past 10 minutes; 2 % of hosts go offline,
// 1 % of requests get 429 and 0.5 % a 5xx, and 5 % of offers are rented by
// others in any simulated hour. A stopped instance's GPU goes to another
// renter at 4 % a minute, which loses about a fifth of a parked fleet over
// a 10-minute launch, as in the published one (218 parked, 172 running). Each key may send 10 requests a market
// second, 100 at once.
//
// "harsh" has more of everything, and 5 % of machines run by operators who
// lie with the agent's credential (Liars).
func Profile(name string) (Faults, error) {
	switch name {
	case "", "none":
		return Faults{}, nil
	case "realistic":
		return Faults{
			RateLimit: 10, RateBurst: 100, Rate5xx: 0.005, LostCreate: 0.002,
			StuckLoading: 0.05, BootFail: 0.05, HostOffline: 0.02, SlowBoot: 0.20,
			TakenWhileStopped: 0.04, OfferChurnPerHour: 0.05, CreateRace: 0.03,
			SSHLate: 0.30, SSHHang: 0.01, SSHDrop: 0.01, DarkHang: 0.5,
		}, nil
	case "harsh":
		return Faults{
			RateLimit: 4, RateBurst: 40, Rate429: 0.02, Rate5xx: 0.04, LostCreate: 0.10,
			StuckLoading: 0.10, BootFail: 0.10, HostOffline: 0.08, SlowBoot: 0.45,
			TakenWhileStopped: 0.05, OfferChurnPerHour: 0.15, CreateRace: 0.10,
			SSHLate: 0.6, SSHHang: 0.05, SSHDrop: 0.05, OnstartFail: 0.05, DarkHang: 0.5,
			Liars: 0.05,
			Spoof: 0.05,
		}, nil
	}
	return Faults{}, fmt.Errorf("sim: unknown fault profile %q (want none, realistic or harsh)", name)
}

// draw returns a deterministic uniform number in [0,1) for the seed and a
// tuple of integers naming what is drawn; it needs no stored RNG position,
// so a reopened market draws the same values.
func draw(seed int64, kind uint64, a, b int64) float64 {
	h := splitmix(uint64(seed) ^ 0x6a09e667f3bcc909)
	h = splitmix(h ^ kind)
	h = splitmix(h ^ uint64(a))
	h = splitmix(h ^ uint64(b))
	return float64(h>>11) / (1 << 53)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Kinds of draws; each names one independent stream.
const (
	drawFault uint64 = iota + 1
	drawOffline
	drawOfflineAfter
	drawSlow
	drawSlowFactor
	drawSetup
	drawCreated
	drawTaken
	drawRestart
	drawChurn
	drawRace
	drawRequest
	drawKey
	drawLogToken
	draw5xx
	drawSSHLate
	drawSSHHang
	drawSSHDrop
	drawOnstartFail
	drawDarkHang
	drawIDBase
	drawMachine
	drawRival
	drawSpell
	drawRivalHold
	drawLiar
	drawOddRow
	drawSpoof
)

// lastMile draws the instance's last-mile faults.
func (m *Market) lastMile(in *instance) {
	f, seed, id := m.cfg.Faults, m.st.Seed, in.fate()
	if draw(seed, drawSSHLate, id, 0) < f.SSHLate {
		in.SSHLate = time.Duration((5 + 55*draw(seed, drawSSHLate, id, 1)) * float64(time.Second))
	}
	in.SSHHang = draw(seed, drawSSHHang, id, 0) < f.SSHHang
	if draw(seed, drawSSHDrop, id, 0) < f.SSHDrop {
		in.SSHDrop = int64(8<<10 + draw(seed, drawSSHDrop, id, 1)*(64<<10))
	}
	in.OnstartFail = draw(seed, drawOnstartFail, id, 0) < f.OnstartFail
	in.DarkHang = draw(seed, drawDarkHang, id, 0) < f.DarkHang
}

// randomIDBase offsets a new market's instance ids; it decides nothing
// about the market's behaviour, so it need not come from the seed.
func randomIDBase() int64 {
	var b [8]byte
	crand.Read(b[:])
	return 1_000_000 + int64(binary.BigEndian.Uint64(b[:])%29_000_000)
}

// instanceKey is a new CONTAINER_API_KEY: random, since anyone who could
// compute it could act as the instance.
func instanceKey() string {
	var b [32]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}
