// Package provider is the marketplace contract: the small interface every
// marketplace client implements, the instance model, and the typed errors
// that callers branch on. The real vast.ai client lives in provider/vast; the
// simulator is reached through that same client over HTTP.
package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
)

// Provider is what vastfleet needs from a GPU marketplace.
//
// Errors are classified with the sentinels below (errors.Is); no caller
// matches error strings.
type Provider interface {
	// SearchOffers runs one offer search; the marketplace caps the result.
	SearchOffers(ctx context.Context, q market.Query) ([]market.Offer, error)
	// CreateInstance rents an offer. It is never retried blindly: on a
	// transport failure or a lost response it returns an error wrapping
	// ErrMaybeCreated, and the caller must look the label up before renting
	// again.
	CreateInstance(ctx context.Context, offerID int64, req CreateRequest) (Created, error)
	// ListInstances returns every instance of the account. It fails with
	// ErrIncompleteListing unless every page arrived and the row count
	// matches the total the marketplace reported.
	ListInstances(ctx context.Context) (Listing, error)
	// ShowInstance returns one instance, or ErrNotFound when the marketplace
	// positively says it does not exist (never on an auth failure).
	ShowInstance(ctx context.Context, id int64) (Instance, error)
	// StartInstance asks a stopped instance to run again.
	StartInstance(ctx context.Context, id int64) error
	// StopInstance stops an instance; storage keeps billing.
	StopInstance(ctx context.Context, id int64) error
	// DestroyInstance asks for the instance to be destroyed. Only a later
	// listing without the instance proves it is gone.
	DestroyInstance(ctx context.Context, id int64) error
	// CurrentUser returns the account behind the key (balance included).
	CurrentUser(ctx context.Context) (User, error)
}

// Operator holds the calls that matter less often than Provider's.
type Operator interface {
	RebootInstance(ctx context.Context, id int64) error
	InstanceLogs(ctx context.Context, id int64, tail int) (string, error)
}

// Bidder changes what an interruptible instance bids (vast's "change bid").
type Bidder interface {
	// ChangeBid sets the bid of instance id in $/hour; nil asks the
	// marketplace for a winning price.
	ChangeBid(ctx context.Context, id int64, price *float64) error
}

// SentTimer is a marketplace client that says when the request behind a
// stop or a destroy left this process. Billing per second ends where the
// marketplace acts on the request, about when it arrives; the answer can
// come much later (the marketplace commits and answers first, the link may
// be slow, the machine loaded), and a ledger that dated the end at the
// answer would bill that wait on every stop and destroy.
type SentTimer interface {
	// StopInstanceSent is StopInstance, and when the request the
	// marketplace answered was sent (its last try, after any wait for
	// the client's rate limit), on the client's clock.
	StopInstanceSent(ctx context.Context, id int64) (sent time.Time, err error)
	// DestroyInstanceSent is DestroyInstance, and when its request was
	// sent, as StopInstanceSent.
	DestroyInstanceSent(ctx context.Context, id int64) (sent time.Time, err error)
}

// CreateRequest is the body of PUT /api/v0/asks/{offer_id}/.
type CreateRequest struct {
	Image   string            `json:"image"`
	Disk    float64           `json:"disk"` // GB
	Env     map[string]string `json:"env"`
	Onstart string            `json:"onstart,omitempty"`
	// Runtype is "ssh" (proxy), "ssh_direc ssh_proxy" (direct), "args", ...
	Runtype string `json:"runtype,omitempty"`
	// Label names vastfleet, the store, the fleet and the intent (see fleet.Label); the
	// marketplace caps it at 256 characters.
	Label string `json:"label"`
	// Price is the bid in $/hour; nil rents on demand.
	Price *float64 `json:"price"`
}

// Created is the create response.
type Created struct {
	Success        bool   `json:"success"`
	NewContract    int64  `json:"new_contract"` // the instance id
	InstanceAPIKey string `json:"instance_api_key,omitempty"`
}

// Listing is a complete listing of the account's instances.
type Listing struct {
	Instances []Instance
	// Total is what the marketplace said the account holds; it equals
	// len(Instances) whenever ListInstances returns without error.
	Total int
	// Pages is how many requests the listing took (0: not known): what
	// one more listing costs of a client's paced calls.
	Pages int
}

// User is the account (GET /api/v0/users/current).
type User struct {
	ID       int64   `json:"id"`
	Username string  `json:"username,omitempty"`
	Email    string  `json:"email,omitempty"`
	Balance  float64 `json:"balance"`
	Credit   float64 `json:"credit"`
}

// PortBinding is one Docker-style entry of an instance's ports map.
type PortBinding struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// Ports maps a container port ("22/tcp") to where the host publishes it.
// vast sends it as that object, and also (its own show-instance example)
// as a bare list of port numbers, which names the ports but publishes
// none; both read, so one odd field does not cost the whole row.
type Ports map[string][]PortBinding

func (p *Ports) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return err
		}
		out := Ports{}
		for _, raw := range list {
			var n json.Number
			var s string
			switch {
			case json.Unmarshal(raw, &n) == nil:
				out[n.String()+"/tcp"] = nil
			case json.Unmarshal(raw, &s) == nil && s != "":
				if !strings.Contains(s, "/") {
					s += "/tcp"
				}
				out[s] = nil
			default:
				return fmt.Errorf("ports: %s is neither a port number nor a name", raw)
			}
		}
		*p = out
		return nil
	}
	var m map[string][]PortBinding
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = m
	return nil
}

// Instance is one row of GET /api/v1/instances/ (and of show instance), with
// the API's names and units.
type Instance struct {
	ID             int64   `json:"id"`
	MachineID      int64   `json:"machine_id"`
	HostID         int64   `json:"host_id"`
	BundleID       int64   `json:"bundle_id,omitempty"`
	ActualStatus   *string `json:"actual_status"` // nil while provisioning
	IntendedStatus string  `json:"intended_status"`
	CurState       string  `json:"cur_state"`
	NextState      string  `json:"next_state,omitempty"`
	StatusMsg      string  `json:"status_msg"`
	Label          *string `json:"label"`

	ImageUUID    string     `json:"image_uuid"`
	ImageRuntype string     `json:"image_runtype"`
	Onstart      string     `json:"onstart,omitempty"`
	ExtraEnv     [][]string `json:"extra_env"`

	SSHHost      string `json:"ssh_host"`
	SSHPort      int    `json:"ssh_port"`
	PublicIPAddr string `json:"public_ipaddr"`
	Ports        Ports  `json:"ports,omitempty"`

	StartDate  float64 `json:"start_date"` // epoch seconds
	EndDate    float64 `json:"end_date,omitempty"`
	UptimeMins float64 `json:"uptime_mins,omitempty"`

	NumGPUs           int     `json:"num_gpus"`
	GPUName           string  `json:"gpu_name"`
	GPURAM            float64 `json:"gpu_ram"`
	GPUTotalRAM       float64 `json:"gpu_totalram"`
	GPUUtil           float64 `json:"gpu_util,omitempty"`
	CPUCores          int     `json:"cpu_cores"`
	CPUCoresEffective float64 `json:"cpu_cores_effective"`
	CPURAM            float64 `json:"cpu_ram"`
	DiskSpace         float64 `json:"disk_space"`
	InetUp            float64 `json:"inet_up"`
	InetDown          float64 `json:"inet_down"`
	// Bandwidth prices ($/GB) and what the marketplace has billed so far
	// (cumulative counters, in KB: see BilledKBPerGB). Zero when a
	// marketplace does not report them.
	InetUpCost     float64 `json:"inet_up_cost,omitempty"`
	InetDownCost   float64 `json:"inet_down_cost,omitempty"`
	InetUpBilled   float64 `json:"inet_up_billed,omitempty"`
	InetDownBilled float64 `json:"inet_down_billed,omitempty"`

	DPHBase          float64 `json:"dph_base"`
	DPHTotal         float64 `json:"dph_total"`
	StorageCost      float64 `json:"storage_cost"`
	StorageTotalCost float64 `json:"storage_total_cost"`
	IsBid            bool    `json:"is_bid"`
	MinBid           float64 `json:"min_bid,omitempty"`
	Reliability2     float64 `json:"reliability2"`
	Verification     string  `json:"verification,omitempty"`
	Geolocation      string  `json:"geolocation"`
	CUDAMaxGood      float64 `json:"cuda_max_good,omitempty"`

	// Quarantine is why the client could not read this row (a field in a
	// shape it does not know); "" for a row read whole. A quarantined row
	// holds only its id, its label when readable, and the status
	// "unknown": it is listed, so nobody counts it gone, and nothing else
	// about it is known.
	Quarantine string `json:"-"`
}

// Quarantined reports whether the row could not be read whole.
func (i *Instance) Quarantined() bool { return i.Quarantine != "" }

// Status is the instance's actual_status, "" while provisioning.
func (i *Instance) Status() string {
	if i.ActualStatus == nil {
		return ""
	}
	return *i.ActualStatus
}

// LabelText is the instance's label, "" when it has none.
func (i *Instance) LabelText() string {
	if i.Label == nil {
		return ""
	}
	return *i.Label
}

// Instance states (actual_status) as the marketplace reports them.
const (
	StateCreated   = "created"
	StateLoading   = "loading"
	StateRunning   = "running"
	StateStopped   = "stopped"
	StateFrozen    = "frozen"
	StateExited    = "exited"
	StateRebooting = "rebooting"
	StateUnknown   = "unknown"
	StateOffline   = "offline"
)
