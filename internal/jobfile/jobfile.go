// Package jobfile reads a job's task file (vastfleet.yaml): what to rent,
// what to run on it and what to bring back. It is pure: bytes in, a
// validated Job or an error naming the line and the fix out.
package jobfile

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/vastfleet/vastfleet/internal/itemspec"
	"github.com/vastfleet/vastfleet/internal/plan"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// DefaultName is the task file `vastfleet up` reads when given none.
const DefaultName = "vastfleet.yaml"

// Planner options a task description can pick.
const (
	OptionCheapest  = "cheapest"
	OptionBestValue = "best_value"
	OptionFastest   = "fastest"
)

// MaxCount is the most nodes one job rents.
const MaxCount = plan.MaxNodes

// Job is a validated task file.
type Job struct {
	Name   string
	Market string // "" (the command line's), sim or vast

	// Renting by query: the offers matching Query, ranked By, Count of them.
	Query    string
	By       string
	Count    int
	MinReady int
	MaxDPH   float64
	Budget   float64
	Deadline time.Duration
	Park     bool

	// Renting by task: the planner's three options, Option picks one.
	Task   *plan.Task
	Option string

	Image    string
	ImageGB  float64
	Disk     float64
	Env      map[string]string
	Ports    []int
	Workdir  string
	Setup    []string
	Run      string
	Sessions []Session
	Results  string
	Items    string

	AutoDestroy bool
	MaxDuration time.Duration
	OrphanAfter time.Duration
	// OnShortHardware is what the launch does with a node whose boot
	// probe measures under 70% of its offer: replace (""), warn or keep.
	OnShortHardware string
	// The teardown ladder (max_lifetime, idle: {after, below},
	// stopped_for): what stops and then destroys a node nobody tears
	// down. Zero: rung not set.
	MaxLifetime time.Duration
	IdleAfter   time.Duration
	IdleBelow   float64
	StoppedFor  time.Duration

	// Probe, when set, ranks the query's offers by the user's own
	// benchmark before the launch (probe: in the task file, as `bench
	// offers --probe`).
	Probe *Probe

	// Cull destroys, during the run, a node that delivers less than a
	// share of the fleet's median per dollar (cull: in the task file),
	// and rents one in its place while a replacement is expected to pay
	// for itself before the job ends; nil culls nothing.
	Cull *Cull

	// Validate is how the coordinator checks the items' results (and,
	// with Verify, the findings): a host's word is not taken as is.
	Validate Validation
}

// Validation is a job's choice of result checks (validate:, spot_checks:
// and verify: in the task file); the zero value checks nothing.
type Validation struct {
	Replicas   int     // validate: {replicas: N, quorum: M}: each item on N distinct machines
	Quorum     int     // ... of which M must agree
	Adaptive   bool    // validate: adaptive: replicate until a host has earned trust
	SpotChecks float64 // spot_checks: share of leases that re-run a validated item, unmarked
	Verify     string  // verify: a command run on this machine per result and finding; exit 0 = valid
}

// Cull is the cull policy: once a node has reported Metric for After
// (market time), it is destroyed when its mean Metric per $/hr is under
// Below times the median of the nodes that reported during the run, and
// replaced when that pays (the job package's Payback).
type Cull struct {
	Below  float64
	After  time.Duration
	Metric string // "": the one metric the nodes report
}

// Probe is a task file's probe: Command runs on one instance of each of
// the Top machine types the query ranks best, bounded by Timeout; zero
// Top and Timeout take bench offers' defaults.
type Probe struct {
	Command string
	Top     int
	Timeout time.Duration
}

// MaxProbeTop is the most machine types a probe may rent.
const MaxProbeTop = 20

// DefaultCullAfter is how long a node reports before a cull judges it.
const DefaultCullAfter = 5 * time.Minute

// MaxReplicas is the most runs of one item validate: asks for.
const MaxReplicas = 8

// Session is one named, long-running command on every node.
type Session struct {
	Name    string
	Command string
}

// Planned says the job rents through the planner.
func (j *Job) Planned() bool { return j.Task != nil }

// Error is a task file mistake: where it is and how to fix it.
type Error struct {
	File string
	Line int // 0 when the mistake has no one place (a missing key)
	Key  string
	Msg  string
	Fix  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString(" (fix: " + e.Fix + ")")
	}
	return b.String()
}

// raw is the file as written. Aliases from the agent-skill config share
// the job's fields: gpu (the marketplace) and max_budget (the budget).
type raw struct {
	Name   string `yaml:"name"`
	Market string `yaml:"market"`
	GPU    string `yaml:"gpu"`

	Query     string   `yaml:"query"`
	By        string   `yaml:"by"`
	Count     *int     `yaml:"count"`
	MinReady  int      `yaml:"min_ready"`
	MaxDPH    float64  `yaml:"max_dph"`
	Budget    *float64 `yaml:"budget"`
	MaxBudget *float64 `yaml:"max_budget"`
	Deadline  string   `yaml:"deadline"`
	Park      bool     `yaml:"park"`

	Task   *rawTask `yaml:"task"`
	Option string   `yaml:"option"`

	Image       string            `yaml:"image"`
	ImageSize   float64           `yaml:"image_size"`
	Disk        float64           `yaml:"disk"`
	Env         map[string]string `yaml:"env"`
	Ports       []int             `yaml:"ports"`
	Workdir     string            `yaml:"workdir"`
	Setup       stringList        `yaml:"setup"`
	Run         string            `yaml:"run"`
	Sessions    map[string]string `yaml:"sessions"`
	Results     string            `yaml:"results"`
	Items       string            `yaml:"items"`
	AutoDestroy *bool             `yaml:"auto_destroy"`
	MaxDuration string            `yaml:"max_duration"`
	OrphanAfter string            `yaml:"orphan_after"`
	OnShort     string            `yaml:"on_short_hardware"`
	MaxLifetime string            `yaml:"max_lifetime"`
	Idle        *rawIdle          `yaml:"idle"`
	Cull        *rawCull          `yaml:"cull"`
	Probe       any               `yaml:"probe"`
	StoppedFor  string            `yaml:"stopped_for"`
	Validate    any               `yaml:"validate"`
	SpotChecks  any               `yaml:"spot_checks"`
	Verify      string            `yaml:"verify"`
}

// rawCull is the cull policy as written.
type rawCull struct {
	Below  float64 `yaml:"below"`
	After  string  `yaml:"after"`
	Metric string  `yaml:"metric"`
}

// rawIdle is the ladder's idle rung: after a duration below a share.
type rawIdle struct {
	After string  `yaml:"after"`
	Below float64 `yaml:"below"`
}

// rawTask is the planner's task description.
type rawTask struct {
	Model       string  `yaml:"model"`
	Params      string  `yaml:"params"`
	Precision   string  `yaml:"precision"`
	Mode        string  `yaml:"mode"`
	Full        bool    `yaml:"full"`
	Optimizer   string  `yaml:"optimizer"`
	BatchSize   int     `yaml:"batch_size"`
	SeqLen      int     `yaml:"seq_len"`
	Dataset     float64 `yaml:"dataset"`
	DatasetGB   float64 `yaml:"dataset_gb"`
	Epochs      float64 `yaml:"epochs"`
	Throughput  float64 `yaml:"throughput"`
	Hours       float64 `yaml:"hours"`
	Distributed string  `yaml:"distributed"`
	GPUs        int     `yaml:"gpus"`
	Framework   string  `yaml:"framework"`
	CUDA        float64 `yaml:"cuda"`
}

// stringList is one command or a list of them.
type stringList []string

func (s *stringList) UnmarshalYAML(unmarshal func(any) error) error {
	var one string
	if err := unmarshal(&one); err == nil {
		*s = stringList{one}
		return nil
	}
	var many []string
	if err := unmarshal(&many); err != nil {
		return errors.New("want a command or a list of commands")
	}
	*s = many
	return nil
}

// Load reads and validates a task file.
func Load(path string) (*Job, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &Error{File: path, Msg: "no such task file", Fix: "write one (see examples/) or name it: vastfleet up FILE"}
		}
		return nil, err
	}
	return Parse(path, b)
}

var (
	yamlPos   = regexp.MustCompile(`^\[(\d+):(\d+)\]\s*`)
	unknownRE = regexp.MustCompile(`unknown field "([^"]+)"`)
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
)

// Parse validates the task file text; name is for messages.
func Parse(name string, b []byte) (*Job, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, &Error{File: name, Msg: "the task file is empty", Fix: "give at least image and run (see examples/)"}
	}
	file, err := parser.ParseBytes(b, 0)
	if err != nil {
		return nil, yamlError(name, err)
	}
	var r raw
	if err := yaml.UnmarshalWithOptions(b, &r, yaml.DisallowUnknownField()); err != nil {
		return nil, yamlError(name, err)
	}
	v := &validator{file: name, ast: file}
	return v.job(&r)
}

// yamlError turns the YAML library's "[line:col] msg" into an Error.
func yamlError(name string, err error) error {
	msg := strings.SplitN(err.Error(), "\n", 2)[0]
	e := &Error{File: name}
	if m := yamlPos.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &e.Line)
		msg = msg[len(m[0]):]
	}
	e.Msg = msg
	if m := unknownRE.FindStringSubmatch(msg); m != nil {
		e.Key = m[1]
		e.Msg = "not a task file key"
		e.Fix = "use one of " + strings.Join(knownKeys(), ", ")
		if s := closest(m[1]); s != "" {
			e.Fix = "did you mean " + s + "?"
		}
	} else {
		e.Fix = "check the YAML syntax on that line (indentation, a missing ':' or quote)"
	}
	return e
}

func knownKeys() []string {
	return []string{"name", "market", "gpu", "query", "by", "count", "min_ready", "max_dph", "budget", "max_budget", "deadline", "park",
		"task", "option", "image", "image_size", "disk", "env", "ports", "workdir", "setup", "run", "sessions", "results", "items",
		"auto_destroy", "max_duration", "orphan_after", "on_short_hardware", "validate", "spot_checks", "verify",
		"max_lifetime", "idle", "stopped_for", "cull", "probe"}
}

// closest is the known key at edit distance ≤ 2 from k, if any.
func closest(k string) string {
	best, bestD := "", 3
	for _, c := range append(knownKeys(), "model", "params", "precision", "mode", "hours", "dataset", "epochs", "throughput", "gpus") {
		if d := plan.EditDistance(k, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

type validator struct {
	file string
	ast  *ast.File
}

// line is where key (a dotted path, "task.model") is written; 0 if absent.
func (v *validator) line(key string) int {
	key, _, _ = strings.Cut(key, "[")
	if len(v.ast.Docs) == 0 {
		return 0
	}
	node, at := v.ast.Docs[0].Body, 0
	for _, part := range strings.Split(key, ".") {
		var next ast.Node
		for _, mv := range mappingValues(node) {
			if mv.Key != nil && mv.Key.String() == part {
				next, at = mv.Value, mv.Key.GetToken().Position.Line
			}
		}
		if next == nil {
			return at
		}
		node = next
	}
	return at
}

func mappingValues(n ast.Node) []*ast.MappingValueNode {
	switch m := n.(type) {
	case *ast.MappingNode:
		return m.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{m}
	}
	return nil
}

func (v *validator) fail(key, fix, format string, args ...any) error {
	return &Error{File: v.file, Line: v.line(key), Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix}
}

func (v *validator) duration(key, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, v.fail(key, "a duration such as 90s, 10m or 2h", "%q is not a duration", s)
	}
	return d, nil
}

func (v *validator) job(r *raw) (*Job, error) {
	j := &Job{Name: r.Name, Query: r.Query, By: r.By, MinReady: r.MinReady, MaxDPH: r.MaxDPH, Park: r.Park,
		Option: r.Option, Image: r.Image, ImageGB: r.ImageSize, Disk: r.Disk, Env: r.Env, Ports: r.Ports,
		Workdir: r.Workdir, Setup: r.Setup, Run: strings.TrimSpace(r.Run), Results: r.Results, Items: r.Items, AutoDestroy: true}
	if j.Name != "" && !nameRE.MatchString(j.Name) {
		return nil, v.fail("name", "letters, digits, '.', '_' and '-', at most 63", "%q is not a usable job name", j.Name)
	}
	// The marketplace: market, or gpu as the agent-skill config says it.
	switch {
	case r.Market != "" && r.GPU != "" && r.Market != r.GPU:
		return nil, v.fail("gpu", "keep one of market and gpu", "gpu %q disagrees with market %q", r.GPU, r.Market)
	case r.Market != "":
		j.Market = r.Market
	default:
		j.Market = r.GPU
	}
	if j.Market != "" && j.Market != "sim" && j.Market != "vast" {
		key := "market"
		if r.Market == "" {
			key = "gpu"
		}
		return nil, v.fail(key, "vast (vast.ai) or sim (the built-in simulator)", "unknown marketplace %q", j.Market)
	}
	if r.Budget != nil && r.MaxBudget != nil {
		return nil, v.fail("max_budget", "keep one: max_budget is another name for budget", "both budget and max_budget are given")
	}
	if r.Budget != nil {
		j.Budget = *r.Budget
	} else if r.MaxBudget != nil {
		j.Budget = *r.MaxBudget
	}
	if r.AutoDestroy != nil {
		j.AutoDestroy = *r.AutoDestroy
	}
	var err error
	if j.Deadline, err = v.duration("deadline", r.Deadline); err != nil {
		return nil, err
	}
	if j.MaxDuration, err = v.duration("max_duration", r.MaxDuration); err != nil {
		return nil, err
	}
	if j.OrphanAfter, err = v.duration("orphan_after", r.OrphanAfter); err != nil {
		return nil, err
	}
	if j.MaxLifetime, err = v.duration("max_lifetime", r.MaxLifetime); err != nil {
		return nil, err
	}
	if j.StoppedFor, err = v.duration("stopped_for", r.StoppedFor); err != nil {
		return nil, err
	}
	if r.Idle != nil {
		if j.IdleAfter, err = v.duration("idle", r.Idle.After); err != nil {
			return nil, err
		}
		j.IdleBelow = r.Idle.Below
		if j.IdleAfter <= 0 || !(j.IdleBelow > 0 && j.IdleBelow <= 100) {
			return nil, v.fail("idle", "idle: {after: 30m, below: 5} (stop a node whose CPU and GPU stayed under 5% for 30 minutes)", "idle needs both after (a duration) and below (a percentage between 0 and 100)")
		}
	}
	if err := v.measured(j, r); err != nil {
		return nil, err
	}
	if j.OrphanAfter > 0 && j.OrphanAfter < time.Minute {
		return nil, v.fail("orphan_after", "at least 1m, so that a slow network does not stop healthy nodes", "%s is too short", j.OrphanAfter)
	}
	switch r.OnShort {
	case "", "replace", "warn", "keep":
		j.OnShortHardware = r.OnShort
	default:
		return nil, v.fail("on_short_hardware", "replace, warn or keep", "%q is not a policy", r.OnShort)
	}

	// What to rent: a query or a task for the planner, not both.
	switch {
	case r.Task != nil && r.Query != "":
		return nil, v.fail("task", "remove query (rent by search) or task (rent through the planner)", "task and query both say what to rent")
	case r.Task != nil:
		if err := v.task(j, r); err != nil {
			return nil, err
		}
	default:
		if r.Option != "" {
			return nil, v.fail("option", "option picks one of the planner's offers: add a task: section, or remove option", "option without a task")
		}
		j.Count = 1
		if r.Count != nil {
			j.Count = *r.Count
		}
		if j.Count < 1 || j.Count > MaxCount {
			return nil, v.fail("count", fmt.Sprintf("a count from 1 to %d", MaxCount), "%d nodes", j.Count)
		}
		if j.Query == "" {
			j.Query = "rentable=True"
		}
		if j.By == "" {
			j.By = "vcpu"
		}
	}
	if j.MinReady < 0 || j.MinReady > max(j.Count, 1) {
		return nil, v.fail("min_ready", fmt.Sprintf("between 1 and count (%d)", j.Count), "%d", j.MinReady)
	}
	if j.MaxDPH < 0 || math.IsNaN(j.MaxDPH) {
		return nil, v.fail("max_dph", "a positive $/hr, or leave it out for no cap", "%v", j.MaxDPH)
	}
	if j.Budget < 0 || math.IsNaN(j.Budget) {
		key := "budget"
		if r.MaxBudget != nil {
			key = "max_budget"
		}
		return nil, v.fail(key, "a positive number of dollars", "%v", j.Budget)
	}
	if j.Disk < 0 || j.ImageGB < 0 {
		return nil, v.fail("disk", "a positive size in GB", "disk %v, image_size %v", j.Disk, j.ImageGB)
	}
	if j.Image == "" {
		return nil, &Error{File: v.file, Key: "image", Msg: "missing", Fix: "name the docker image every node runs, e.g. image: ubuntu:22.04"}
	}
	for _, p := range j.Ports {
		if p < 1 || p > 65535 {
			return nil, v.fail("ports", "TCP ports from 1 to 65535", "port %d", p)
		}
	}
	for k := range j.Env {
		if !envKey.MatchString(k) {
			return nil, v.fail("env", "names of letters, digits and '_', not starting with a digit", "%q is not an environment variable name", k)
		}
	}
	for i, s := range j.Setup {
		if strings.TrimSpace(s) == "" {
			return nil, v.fail(fmt.Sprintf("setup[%d]", i), "remove the empty command", "empty setup command")
		}
	}
	names := make([]string, 0, len(r.Sessions))
	for n := range r.Sessions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !wire.ValidSessionName(n) || n == "run" {
			return nil, v.fail("sessions", "session names of "+wire.SessionNameRule+" (run is the run command's)", "session name %q", n)
		}
		if strings.TrimSpace(r.Sessions[n]) == "" {
			return nil, v.fail("sessions."+n, "give the command the session runs", "empty command")
		}
		j.Sessions = append(j.Sessions, Session{Name: n, Command: r.Sessions[n]})
	}
	if j.Run == "" && len(j.Sessions) == 0 {
		return nil, &Error{File: v.file, Key: "run", Msg: "nothing to run", Fix: "give run: COMMAND (the job ends when it exits on every node) or sessions:"}
	}
	// Paths in the file are the file's own: workdir and an items file
	// resolve against its directory, wherever up is run from.
	dir := filepath.Dir(v.file)
	if j.Workdir != "" && !filepath.IsAbs(j.Workdir) {
		j.Workdir = filepath.Join(dir, j.Workdir)
	}
	if p, ok := itemspec.FilePath(j.Items); ok && !filepath.IsAbs(p) {
		j.Items = "@" + filepath.Join(dir, p)
	}
	if j.Items != "" {
		if _, err := itemspec.ParseItems(j.Items); err != nil {
			return nil, v.fail("items", "a file of one item per line (relative to the task file), a range like 0..9999 or a grid like lr=0.1,0.01;bs=32,64", "%v", err)
		}
	}
	if j.Items != "" && !strings.Contains(j.Run, "{item}") && !sessionsName(j.Sessions, "{item}") {
		return nil, v.fail("items", "put {item} in run (or a session's command): it is replaced by each item's value", "nothing runs the items")
	}
	if j.Run == "" && j.MaxDuration == 0 && j.Items == "" {
		return nil, v.fail("sessions", "add max_duration (sessions run until stopped), or a run command", "sessions alone never finish")
	}
	if j.Results != "" && !strings.HasPrefix(j.Results, "/") {
		return nil, v.fail("results", "an absolute path on the nodes, e.g. /workspace/project/results", "%q is relative", j.Results)
	}
	if err := v.validation(j, r); err != nil {
		return nil, err
	}
	return j, nil
}

// validation reads validate:, spot_checks: and verify:.
// measured reads what judges the machines by the user's own measure: the
// cull policy and the probe.
func (v *validator) measured(j *Job, r *raw) (err error) {
	if r.Cull != nil {
		if j.Cull, err = v.cull(r.Cull); err != nil {
			return err
		}
	}
	if r.Probe != nil {
		j.Probe, err = v.probe(r)
	}
	return err
}

// cull checks the cull policy.
func (v *validator) cull(r *rawCull) (*Cull, error) {
	c := &Cull{Below: r.Below, After: DefaultCullAfter, Metric: r.Metric}
	if r.After != "" {
		d, err := v.duration("cull", r.After)
		if err != nil {
			return nil, err
		}
		c.After = d
	}
	const fix = "cull: {below: 0.5, after: 5m, metric: hashes_per_s} (destroy a node delivering under half the median node's metric per $/hr, judged after 5 minutes of reports)"
	switch {
	case !(c.Below > 0 && c.Below < 1):
		return nil, v.fail("cull", fix, "below %g: want a share of the median between 0 and 1", c.Below)
	case c.After < time.Minute:
		return nil, v.fail("cull", fix, "after %s: at least 1m, so that a node is judged on more than one report", c.After)
	}
	return c, nil
}

// probe checks the probe: a command, or {command, top, timeout}; it ranks
// a query's offers, so a planned task has none.
func (v *validator) probe(r *raw) (*Probe, error) {
	const fix = "probe: 'CMD' or probe: {command: 'CMD', top: 5, timeout: 2m}, CMD printing units per second as the first word of its last line"
	if r.Task != nil {
		return nil, v.fail("probe", "remove probe (it ranks a query's offers), or rent by query:", "a planned task has no offers to probe")
	}
	p := &Probe{}
	switch x := r.Probe.(type) {
	case string:
		p.Command = x
	case map[string]any:
		for k := range x {
			if k != "command" && k != "top" && k != "timeout" {
				return nil, v.fail("probe", fix, "unknown key %q", k)
			}
		}
		p.Command, _ = x["command"].(string)
		if err := v.probeBounds(p, x); err != nil {
			return nil, err
		}
	default:
		return nil, v.fail("probe", fix, "%v is not a probe", x)
	}
	if p.Command = strings.TrimSpace(p.Command); p.Command == "" {
		return nil, v.fail("probe", fix, "no command")
	}
	return p, nil
}

// probeBounds reads a probe's top and timeout.
func (v *validator) probeBounds(p *Probe, x map[string]any) error {
	if t, given := x["top"]; given {
		n, ok := whole(t)
		if !ok || n < 1 || n > MaxProbeTop {
			return v.fail("probe", fmt.Sprintf("top from 1 to %d: how many machine types to probe", MaxProbeTop), "top %v", t)
		}
		p.Top = n
	}
	if t, given := x["timeout"]; given {
		ts, _ := t.(string)
		d, err := time.ParseDuration(ts)
		if err != nil || d < time.Second {
			return v.fail("probe", "a timeout such as 90s or 2m (at least 1s)", "timeout %v", t)
		}
		p.Timeout = d
	}
	return nil
}

func (v *validator) validation(j *Job, r *raw) error {
	const fix = "validate: adaptive, or validate: {replicas: 2, quorum: 2}"
	switch x := r.Validate.(type) {
	case nil:
	case string:
		if x != "adaptive" {
			return v.fail("validate", fix, "%q is not a validation", x)
		}
		j.Validate.Adaptive = true
	case map[string]any:
		for k := range x {
			if k != "replicas" && k != "quorum" {
				return v.fail("validate", fix, "unknown key %q", k)
			}
		}
		n, ok := whole(x["replicas"])
		if !ok || n < 2 || n > MaxReplicas {
			return v.fail("validate", fmt.Sprintf("replicas from 2 to %d: how many distinct machines run each item", MaxReplicas), "replicas %v", x["replicas"])
		}
		q := n/2 + 1
		if _, given := x["quorum"]; given {
			if q, ok = whole(x["quorum"]); !ok || q < 1 || q > n {
				return v.fail("validate", fmt.Sprintf("a quorum from 1 to replicas (%d): how many must agree", n), "quorum %v", x["quorum"])
			}
		}
		j.Validate.Replicas, j.Validate.Quorum = n, q
	default:
		return v.fail("validate", fix, "%v is not a validation", x)
	}
	if r.SpotChecks != nil {
		share, ok := fraction(r.SpotChecks)
		if !ok || share < 0 || share >= 1 {
			return v.fail("spot_checks", "a share of the leases below 1, e.g. 0.05 or 5%", "%v", r.SpotChecks)
		}
		j.Validate.SpotChecks = share
	}
	j.Validate.Verify = strings.TrimSpace(r.Verify)
	if (j.Validate.Replicas > 0 || j.Validate.Adaptive || j.Validate.SpotChecks > 0) && j.Items == "" {
		key := "validate"
		if r.Validate == nil {
			key = "spot_checks"
		}
		return v.fail(key, "add items: (the results checked are the items'), or use verify: for findings", "no items to check")
	}
	return nil
}

// whole is a YAML integer.
func whole(x any) (int, bool) {
	switch n := x.(type) {
	case uint64:
		return int(min(n, math.MaxInt32)), true
	case int64:
		return int(max(min(n, math.MaxInt32), math.MinInt32)), true
	case int:
		return n, true
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < math.MaxInt32 {
			return int(n), true
		}
	}
	return 0, false
}

// fraction is a share as a number (0.05) or a percentage ("5%").
func fraction(x any) (float64, bool) {
	switch n := x.(type) {
	case string:
		p, ok := strings.CutSuffix(strings.TrimSpace(n), "%")
		if !ok {
			return 0, false
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		return f / 100, err == nil && !math.IsNaN(f)
	case float64:
		return n, !math.IsNaN(n)
	}
	if w, ok := whole(x); ok {
		return float64(w), true
	}
	return 0, false
}

func sessionsName(ss []Session, s string) bool {
	for _, x := range ss {
		if strings.Contains(x.Command, s) {
			return true
		}
	}
	return false
}

var (
	envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func (v *validator) task(j *Job, r *raw) error {
	t := r.Task
	pt := &plan.Task{Model: t.Model, Precision: t.Precision, Mode: t.Mode, Full: t.Full, Optimizer: t.Optimizer,
		BatchSize: t.BatchSize, SeqLen: t.SeqLen, DatasetSize: t.Dataset, DatasetGB: t.DatasetGB, Epochs: t.Epochs,
		Throughput: t.Throughput, Hours: t.Hours, Distributed: t.Distributed, GPUs: t.GPUs, Image: r.Image,
		ImageGB: r.ImageSize, DiskGB: r.Disk, Framework: t.Framework, CUDA: t.CUDA, MaxBudget: j.Budget}
	if t.Params != "" {
		p, err := plan.ParseParams(t.Params)
		if err != nil {
			return v.fail("task.params", "a parameter count such as 7B, 350M or 6.7e9", "%v", err)
		}
		pt.Params = p
	}
	if pt.Model == "" && pt.Params == 0 {
		return v.fail("task", "say what runs: model: 7b (or llama2-13b, resnet50, ...) or params: 7B", "no model")
	}
	if _, err := plan.Requirements(*pt); err != nil {
		return v.fail("task", "see `vastfleet plan --help` for the task fields", "%v", err)
	}
	switch j.Option {
	case "":
		// The command asks, or takes the best value off a terminal.
	case OptionCheapest, OptionBestValue, OptionFastest:
	default:
		return v.fail("option", "cheapest, best_value or fastest", "unknown option %q", j.Option)
	}
	if r.Count != nil && *r.Count != 1 {
		return v.fail("count", "the planner rents one node with the GPUs the task needs; remove count", "count %d with a task", *r.Count)
	}
	j.Task, j.Count = pt, 1
	return nil
}
