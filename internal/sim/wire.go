package sim

// InstanceRow is one instance as the simulator answers it (the v1 listing
// rows and show instance), written from vast-api.md §7.2 and kept apart
// from the client's model: a test comparing the two compares two
// independent readings of the API.
type InstanceRow struct {
	ID             int64   `json:"id"`
	MachineID      int64   `json:"machine_id"`
	HostID         int64   `json:"host_id"`
	BundleID       int64   `json:"bundle_id"`
	ActualStatus   *string `json:"actual_status"`
	IntendedStatus string  `json:"intended_status"`
	CurState       string  `json:"cur_state"`
	NextState      string  `json:"next_state"`
	StatusMsg      string  `json:"status_msg"`
	Label          *string `json:"label"`

	ImageUUID    string     `json:"image_uuid"`
	ImageArgs    []string   `json:"image_args"`
	ImageRuntype string     `json:"image_runtype"`
	Onstart      string     `json:"onstart"`
	ExtraEnv     [][]string `json:"extra_env"`
	TemplateID   *int64     `json:"template_id"`
	JupyterToken string     `json:"jupyter_token"`

	// Addresses: all loopback in the simulator.
	SSHHost         string                 `json:"ssh_host"`
	SSHPort         int                    `json:"ssh_port"`
	SSHIdx          string                 `json:"ssh_idx"`
	PublicIPAddr    string                 `json:"public_ipaddr"`
	LocalIPAddrs    string                 `json:"local_ipaddrs"`
	DirectPortStart int                    `json:"direct_port_start"`
	DirectPortEnd   int                    `json:"direct_port_end"`
	DirectPortCount int                    `json:"direct_port_count"`
	Ports           map[string][]portEntry `json:"ports,omitempty"` // absent unless running

	StartDate  float64 `json:"start_date"`
	EndDate    float64 `json:"end_date"`
	UptimeMins float64 `json:"uptime_mins"`

	NumGPUs           int     `json:"num_gpus"`
	GPUName           string  `json:"gpu_name"`
	GPURAM            float64 `json:"gpu_ram"`
	GPUTotalRAM       float64 `json:"gpu_totalram"`
	GPUUtil           float64 `json:"gpu_util"`
	CPUCores          int     `json:"cpu_cores"`
	CPUCoresEffective float64 `json:"cpu_cores_effective"`
	CPURAM            float64 `json:"cpu_ram"`
	DiskSpace         float64 `json:"disk_space"`
	DiskUtil          float64 `json:"disk_util"`
	InetUp            float64 `json:"inet_up"`
	InetDown          float64 `json:"inet_down"`
	// Bandwidth: prices ($/GB) and cumulative billed counters (KB), as
	// vast reports them; only the image pull is billed here, so nothing
	// goes up.
	InetUpCost     float64 `json:"inet_up_cost"`
	InetDownCost   float64 `json:"inet_down_cost"`
	InetUpBilled   float64 `json:"inet_up_billed"`
	InetDownBilled float64 `json:"inet_down_billed"`

	DPHBase          float64 `json:"dph_base"`
	DPHTotal         float64 `json:"dph_total"`
	StorageCost      float64 `json:"storage_cost"`
	StorageTotalCost float64 `json:"storage_total_cost"`
	IsBid            bool    `json:"is_bid"`
	MinBid           float64 `json:"min_bid"`
	Reliability2     float64 `json:"reliability2"`
	Verification     string  `json:"verification"`
	Geolocation      string  `json:"geolocation"`
	CUDAMaxGood      float64 `json:"cuda_max_good"`
}

// portEntry is one Docker-style binding; HostPort is a string, as vast
// sends it.
type portEntry struct {
	HostIP   string `json:"HostIp"`
	HostPort string `json:"HostPort"`
}

// Status is the row's actual_status, "" while it is null.
func (r *InstanceRow) Status() string {
	if r.ActualStatus == nil {
		return ""
	}
	return *r.ActualStatus
}
