// Package benchrank measures vastfleet's offer ranking against the plain
// Python recipe (shared/bench/py_rank_baseline.py) on the same dump, side
// by side, and the simulated market's search rate: the figures of
// `vastfleet bench rank`.
package benchrank

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/scalebench"
	"github.com/vastfleet/vastfleet/internal/stat"
)

// rankQuery is the recipe's filter (--min-cpu 8 --min-inet 100
// --exclude-geo CN,VN --max-dph 1.5) in the query language.
const rankQuery = "cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5"

var recipeArgs = []string{"--min-cpu", "8", "--min-inet", "100", "--exclude-geo", "CN,VN", "--max-dph", "1.5", "--top", "20"}

// SearchQueries are the queries the simulator's search rate is
// measured with, by name: the empty query is the index's best case, so
// the rate is given for selective queries and one that matches nothing.
var SearchQueries = []struct{ Name, Query string }{
	{"default (every rentable offer)", ""},
	{"the recipe's filter", rankQuery},
	{"selective", "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98 dph_total<=2"},
	{"matches nothing", "cpu_cores_effective>100000"},
}

// Row is one measure, vastfleet beside the recipe.
type Row struct {
	Measure   string  `json:"measure"`
	Vastfleet float64 `json:"vastfleet"`
	Recipe    float64 `json:"recipe,omitempty"`
	Unit      string  `json:"unit"`
	Ratio     float64 `json:"ratio,omitempty"` // how many times better vastfleet is
}

// Config is what to measure.
type Config struct {
	// Bin is the vastfleet binary measured (this one).
	Bin string
	// Recipe is the Python recipe's path.
	Recipe string
	// File is an offers dump to rank; "" generates Offers offers with the
	// recipe's --gen.
	File string
	// Offers sizes the generated dump and the simulated market (machines).
	Offers int
	// Pairs is how many alternating runs of each side the medians are of.
	Pairs int
	// Seconds is how long the simulator's search rate is measured.
	Seconds float64
	// APIKey is the key the simulated market accepts.
	APIKey string
	// Log takes progress lines.
	Log io.Writer
}

// Result is the rows, in-process first, and the dump's size.
type Result struct {
	Offers int
	Rows   []Row
}

// Run measures both sides, alternating them Pairs times.
func Run(ctx context.Context, cfg Config) (Result, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return Result{}, fmt.Errorf("bench rank needs python3 for the recipe: %w", err)
	}
	recipe, self := cfg.Recipe, cfg.Bin
	dir, err := os.MkdirTemp("", "vastfleet-bench-rank-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	dump := cfg.File
	if dump == "" {
		dump = filepath.Join(dir, "offers.json")
		fmt.Fprintf(cfg.Log, "generating %d offers with the recipe's --gen...\n", cfg.Offers)
		// Straight to the file: this process stays small, since a child's
		// peak memory as the kernel reports it counts the parent's.
		fh, err := os.Create(dump)
		if err != nil {
			return Result{}, err
		}
		gen := exec.CommandContext(ctx, python, recipe, "--gen", strconv.Itoa(cfg.Offers), "--seed", "1")
		gen.Stdout = fh
		err = gen.Run()
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return Result{}, fmt.Errorf("recipe --gen: %w", err)
		}
	}
	// Child processes are measured first, while this process is small:
	// a child's peak memory as the kernel reports it includes the
	// parent's at the moment it was started.
	var rows []Row
	// Whole process: load + rank + print, as each is run by a user.
	var goProc, pyProc []float64
	var goRSS, pyRSS []float64
	for range cfg.Pairs {
		pt, prss, err := timeProcess(ctx, python, append([]string{recipe, dump}, recipeArgs...)...)
		if err != nil {
			return Result{}, fmt.Errorf("recipe: %w", err)
		}
		gt, grss, err := timeProcess(ctx, self, "search", "--from", dump, "-n", "--by", "vcpu", "--limit", "20", rankQuery)
		if err != nil {
			return Result{}, fmt.Errorf("vastfleet search --from: %w", err)
		}
		pyProc, goProc = append(pyProc, pt), append(goProc, gt)
		pyRSS, goRSS = append(pyRSS, prss), append(goRSS, grss)
	}
	rows = append(rows, pairRow("process: load + rank + print top 20", goProc, pyProc, "s"))
	rows = append(rows, pairRow("process: peak memory", goRSS, pyRSS, "MiB"))
	// Every match, like with like: the same dump, a table of every match
	// on both sides (--limit 0 here, --top above the dump's size there).
	allArgs := append(slices.Clone(recipeArgs[:len(recipeArgs)-1]), strconv.Itoa(cfg.Offers+1))
	var goAll, pyAll []float64
	for range cfg.Pairs {
		pt, _, err := timeProcess(ctx, python, append([]string{recipe, dump}, allArgs...)...)
		if err != nil {
			return Result{}, fmt.Errorf("recipe: %w", err)
		}
		gt, _, err := timeProcess(ctx, self, "search", "--from", dump, "-n", "--by", "vcpu", "--limit", "0", rankQuery)
		if err != nil {
			return Result{}, fmt.Errorf("vastfleet search --from: %w", err)
		}
		pyAll, goAll = append(pyAll, pt), append(goAll, gt)
	}
	rows = append(rows, pairRow("process: load + rank + print every match (table)", goAll, pyAll, "s"))

	// The simulator, vastfleet alone.
	simRows, err := simulate(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	rows = append(rows, simRows...)

	data, err := os.ReadFile(dump)
	if err != nil {
		return Result{}, err
	}
	offers, err := market.DecodeOffers(data)
	if err != nil {
		return Result{}, err
	}
	q, _, err := market.Parse(rankQuery, market.ParseOptions{NoDefault: true})
	if err != nil {
		return Result{}, err
	}
	filter, err := market.Compile(q)
	if err != nil {
		return Result{}, err
	}
	scorer, _ := market.ScoreBy("vcpu")

	// In-process: the recipe's --repeat mean against the same work here.
	const repeat = 10
	meanRe := regexp.MustCompile(`mean ([0-9.]+) s/run`)
	var goRank, pyRank []float64
	for range cfg.Pairs {
		cmd := exec.CommandContext(ctx, python, append([]string{recipe, dump, "--repeat", strconv.Itoa(repeat)}, recipeArgs...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return Result{}, fmt.Errorf("recipe: %w: %s", err, stderr.String())
		}
		m := meanRe.FindStringSubmatch(stderr.String())
		if m == nil {
			return Result{}, fmt.Errorf("recipe printed no mean: %s", stderr.String())
		}
		py, _ := strconv.ParseFloat(m[1], 64)
		pyRank = append(pyRank, py)
		// One untimed run first: the recipe's process has just exited and
		// the kernel is still returning its memory on one of the cores.
		market.RankIndices(offers, filter.Match, scorer, 0)
		start := time.Now()
		for range repeat {
			market.RankIndices(offers, filter.Match, scorer, 0)
		}
		goRank = append(goRank, time.Since(start).Seconds()/repeat)
	}
	rows = slices.Insert(rows, 0, pairRow("in-process filter+score+sort (every match)", goRank, pyRank, "s"))

	return Result{Offers: len(offers), Rows: rows}, nil
}

// pairRow holds medians; ratio is recipe / vastfleet (lower is better).
func pairRow(name string, vf, rec []float64, unit string) Row {
	r := Row{Measure: name, Vastfleet: stat.Median(vf), Recipe: stat.Median(rec), Unit: unit}
	if r.Vastfleet > 0 {
		r.Ratio = r.Recipe / r.Vastfleet
	}
	return r
}

// timeProcess runs a command with its output discarded and returns its wall
// seconds and peak resident memory (MiB).
func timeProcess(ctx context.Context, name string, args ...string) (float64, float64, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	wall := time.Since(start).Seconds()
	return wall, float64(scalebench.PeakRSS(cmd.ProcessState)) / (1 << 20), nil
}

// simulate serves a simulated market of --offers machines on loopback
// and measures its search rate for each of SearchQueries and a full
// `search --all --json` against it.
func simulate(ctx context.Context, cfg Config) ([]Row, error) {
	self := cfg.Bin
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	simDir, err := os.MkdirTemp("", "vastfleet-bench-sim-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(simDir)
	srv := exec.CommandContext(ctx, self, "--data-dir", simDir, "sim", "serve", "--addr", addr, "--offers", strconv.Itoa(cfg.Offers), "--faults", "none", "--no-hosts")
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	url := "http://" + addr
	client, err := vast.New(vast.Options{BaseURL: url, APIKey: cfg.APIKey})
	if err != nil {
		return nil, err
	}
	q, _, err := market.Parse("", market.ParseOptions{Limit: 100})
	if err != nil {
		return nil, err
	}
	// The first search waits for the server to listen and builds its index.
	for tries := 0; ; tries++ {
		_, err := client.SearchOffers(ctx, q)
		if err == nil {
			break
		}
		if tries > 100 {
			return nil, fmt.Errorf("the simulator never answered: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var rows []Row
	for _, bq := range SearchQueries {
		q, _, err := market.Parse(bq.Query, market.ParseOptions{Limit: 100})
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", bq.Query, err)
		}
		rate, n, err := searchRate(ctx, client, q, time.Duration(cfg.Seconds*float64(time.Second)))
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", bq.Query, err)
		}
		fmt.Fprintf(cfg.Log, "simulator: %d searches (%s: %q)\n", n, bq.Name, bq.Query)
		name := fmt.Sprintf("simulator: searches/s, --limit 100, %s", bq.Name)
		if bq.Query != "" {
			name += ": " + bq.Query
		}
		rows = append(rows, Row{Measure: name, Vastfleet: rate, Unit: "1/s"})
	}

	all, rss, err := timeProcess(ctx, self, "--market", "sim", "--api-url", url, "--data-dir", filepath.Join(simDir, "client"),
		"search", "--all", "--json", "-n", "--by", "vcpu", rankQuery)
	if err != nil {
		return nil, fmt.Errorf("search --all: %w", err)
	}
	size := fmt.Sprintf("%d machines, ~%d offers", cfg.Offers, cfg.Offers*126/100)
	rows = append(rows,
		Row{Measure: "simulator (" + size + "): search --all --json, the recipe's filter", Vastfleet: all, Unit: "s"},
		Row{Measure: "simulator: search --all --json: peak memory", Vastfleet: rss, Unit: "MiB"})
	return rows, nil
}

// searchRate is how many searches q the client completes per second,
// four at a time, over d.
func searchRate(ctx context.Context, client *vast.Client, q market.Query, d time.Duration) (float64, int, error) {
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	start := time.Now()
	deadline := start.Add(d)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				_, err := client.SearchOffers(ctx, q)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				n++
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return 0, n, firstErr
	}
	return float64(n) / time.Since(start).Seconds(), n, nil
}
