package cli

import (
	"bytes"
	"context"
	"fmt"
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

	"github.com/spf13/cobra"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider/vast"
	"github.com/vastfleet/vastfleet/internal/scalebench"
	"github.com/vastfleet/vastfleet/internal/stat"
)

// benchRankQuery is the recipe's filter (--min-cpu 8 --min-inet 100
// --exclude-geo CN,VN --max-dph 1.5) in the query language.
const benchRankQuery = "cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5"

var benchRecipeArgs = []string{"--min-cpu", "8", "--min-inet", "100", "--exclude-geo", "CN,VN", "--max-dph", "1.5", "--top", "20"}

// benchSearchQueries are the queries the simulator's search rate is
// measured with, by name: the empty query is the index's best case, so
// the rate is given for selective queries and one that matches nothing.
var benchSearchQueries = []struct{ Name, Query string }{
	{"default (every rentable offer)", ""},
	{"the recipe's filter", benchRankQuery},
	{"selective", "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98 dph_total<=2"},
	{"matches nothing", "cpu_cores_effective>100000"},
}

type benchRankOptions struct {
	Offers  int
	Pairs   int
	Recipe  string
	File    string
	Seconds float64
	JSONFlags
}

// benchRankRow is one measure, vastfleet beside the recipe.
type benchRankRow struct {
	Measure   string  `json:"measure"`
	Vastfleet float64 `json:"vastfleet"`
	Recipe    float64 `json:"recipe,omitempty"`
	Unit      string  `json:"unit"`
	Ratio     float64 `json:"ratio,omitempty"` // how many times better vastfleet is
}

// newBenchRankCmd parses into benchRankOptions and hands them to runF
// (tests) or benchRankRun.
func newBenchRankCmd(f *factory, runF func(context.Context, *benchRankOptions) error) *cobra.Command {
	opts := &benchRankOptions{}
	cmd := &cobra.Command{
		Use:   "rank",
		Short: "Ranking speed against the plain Python recipe, side by side",
		Long: `Rank the same offers dump with vastfleet and with the Python recipe
(shared/bench/py_rank_baseline.py), alternating the two, and print medians:

  in-process   filter + score + sort of every offer (the recipe's rank())
  process      load + rank + print, as a user runs each: the top 20, and every
               match (both a table of every match of the same dump)
  simulator    vastfleet alone: searches/s for --limit 100 with each named query,
               and search --all --json (every match), its time and peak memory, on
               a simulated market (sim serve --offers sets machines: about 1.26
               offers each, so not the dump's size and no ratio)

The dump is generated with the recipe's --gen unless --file names one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return benchRankRun(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().IntVar(&opts.Offers, "offers", 100_000, "offers in the generated dump and the simulated market")
	cmd.Flags().IntVar(&opts.Pairs, "pairs", 5, "alternating runs of each side; medians are printed")
	cmd.Flags().StringVar(&opts.Recipe, "recipe", "", "the Python recipe (default: "+recipeFile+" here or in a parent directory)")
	cmd.Flags().StringVar(&opts.File, "file", "", "rank this offers JSON array instead of a generated one")
	cmd.Flags().Float64Var(&opts.Seconds, "seconds", 3, "how long to measure the simulator's search rate")
	limitFlags(cmd.Flags(), bounds{"offers", "1", "10000000"}, bounds{"pairs", "1", "1000"}, bounds{"seconds", ">0", "3600"})
	addJSONFlags(cmd.Flags(), &opts.JSONFlags, "print the rows as JSON")
	return cmd
}

func benchRankRun(ctx context.Context, f *factory, opts *benchRankOptions) error {
	if opts.Offers < 1 || opts.Pairs < 1 || opts.Seconds <= 0 {
		return usagef("--offers, --pairs and --seconds must be positive")
	}
	recipe := opts.Recipe
	if recipe == "" {
		wd, _ := os.Getwd()
		r, err := findRecipe(wd)
		if err != nil {
			return usagef("%v", err)
		}
		recipe = r
	}
	python, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("bench rank needs python3 for the recipe: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "vastfleet-bench-rank-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dump := opts.File
	if dump == "" {
		dump = filepath.Join(dir, "offers.json")
		fmt.Fprintf(f.io.ErrOut, "generating %d offers with the recipe's --gen...\n", opts.Offers)
		// Straight to the file: this process stays small, since a child's
		// peak memory as the kernel reports it counts the parent's.
		fh, err := os.Create(dump)
		if err != nil {
			return err
		}
		gen := exec.CommandContext(ctx, python, recipe, "--gen", strconv.Itoa(opts.Offers), "--seed", "1")
		gen.Stdout = fh
		err = gen.Run()
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("recipe --gen: %w", err)
		}
	}
	// Child processes are measured first, while this process is small:
	// a child's peak memory as the kernel reports it includes the
	// parent's at the moment it was started.
	var rows []benchRankRow
	// Whole process: load + rank + print, as each is run by a user.
	var goProc, pyProc []float64
	var goRSS, pyRSS []float64
	for range opts.Pairs {
		pt, prss, err := timeProcess(ctx, python, append([]string{recipe, dump}, benchRecipeArgs...)...)
		if err != nil {
			return fmt.Errorf("recipe: %w", err)
		}
		gt, grss, err := timeProcess(ctx, self, "search", "--from", dump, "-n", "--by", "vcpu", "--limit", "20", benchRankQuery)
		if err != nil {
			return fmt.Errorf("vastfleet search --from: %w", err)
		}
		pyProc, goProc = append(pyProc, pt), append(goProc, gt)
		pyRSS, goRSS = append(pyRSS, prss), append(goRSS, grss)
	}
	rows = append(rows, pairRow("process: load + rank + print top 20", goProc, pyProc, "s"))
	rows = append(rows, pairRow("process: peak memory", goRSS, pyRSS, "MiB"))
	// Every match, like with like: the same dump, a table of every match
	// on both sides (--limit 0 here, --top above the dump's size there).
	allArgs := append(slices.Clone(benchRecipeArgs[:len(benchRecipeArgs)-1]), strconv.Itoa(opts.Offers+1))
	var goAll, pyAll []float64
	for range opts.Pairs {
		pt, _, err := timeProcess(ctx, python, append([]string{recipe, dump}, allArgs...)...)
		if err != nil {
			return fmt.Errorf("recipe: %w", err)
		}
		gt, _, err := timeProcess(ctx, self, "search", "--from", dump, "-n", "--by", "vcpu", "--limit", "0", benchRankQuery)
		if err != nil {
			return fmt.Errorf("vastfleet search --from: %w", err)
		}
		pyAll, goAll = append(pyAll, pt), append(goAll, gt)
	}
	rows = append(rows, pairRow("process: load + rank + print every match (table)", goAll, pyAll, "s"))

	// The simulator, vastfleet alone.
	simRows, err := benchRankSim(ctx, f, opts, self)
	if err != nil {
		return err
	}
	rows = append(rows, simRows...)

	data, err := os.ReadFile(dump)
	if err != nil {
		return err
	}
	offers, err := market.DecodeOffers(data)
	if err != nil {
		return err
	}
	q, _, err := market.Parse(benchRankQuery, market.ParseOptions{NoDefault: true})
	if err != nil {
		return err
	}
	filter, err := market.Compile(q)
	if err != nil {
		return err
	}
	scorer, _ := market.ScoreBy("vcpu")

	// In-process: the recipe's --repeat mean against the same work here.
	const repeat = 10
	meanRe := regexp.MustCompile(`mean ([0-9.]+) s/run`)
	var goRank, pyRank []float64
	for range opts.Pairs {
		cmd := exec.CommandContext(ctx, python, append([]string{recipe, dump, "--repeat", strconv.Itoa(repeat)}, benchRecipeArgs...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("recipe: %w: %s", err, stderr.String())
		}
		m := meanRe.FindStringSubmatch(stderr.String())
		if m == nil {
			return fmt.Errorf("recipe printed no mean: %s", stderr.String())
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

	if opts.JSON {
		return writeJSON(opts.out(f.io.Out), rows)
	}
	fmt.Fprintf(f.io.Out, "%d offers, %d pairs, medians (the machine's load affects both sides alike)\n", len(offers), opts.Pairs)
	t := newTable(f.io.Out, "MEASURE", "VASTFLEET", "RECIPE", "UNIT", "VASTFLEET IS")
	for _, r := range rows {
		rec, ratio := "", ""
		if r.Recipe > 0 {
			rec = strconv.FormatFloat(r.Recipe, 'g', 4, 64)
			ratio = fmt.Sprintf("%.1fx", r.Ratio)
		}
		t.row(r.Measure, strconv.FormatFloat(r.Vastfleet, 'g', 4, 64), rec, r.Unit, ratio)
	}
	return t.flush()
}

// pairRow holds medians; ratio is recipe / vastfleet (lower is better).
func pairRow(name string, vf, rec []float64, unit string) benchRankRow {
	r := benchRankRow{Measure: name, Vastfleet: stat.Median(vf), Recipe: stat.Median(rec), Unit: unit}
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

// benchRankSim serves a simulated market of --offers machines on loopback
// and measures its search rate for each of benchSearchQueries and a full
// `search --all --json` against it.
func benchRankSim(ctx context.Context, f *factory, opts *benchRankOptions, self string) ([]benchRankRow, error) {
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
	srv := exec.CommandContext(ctx, self, "--data-dir", simDir, "sim", "serve", "--addr", addr, "--offers", strconv.Itoa(opts.Offers), "--faults", "none", "--no-hosts")
	if err := srv.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	url := "http://" + addr
	client, err := vast.New(vast.Options{BaseURL: url, APIKey: simAPIKey})
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
	var rows []benchRankRow
	for _, bq := range benchSearchQueries {
		q, _, err := market.Parse(bq.Query, market.ParseOptions{Limit: 100})
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", bq.Query, err)
		}
		rate, n, err := searchRate(ctx, client, q, time.Duration(opts.Seconds*float64(time.Second)))
		if err != nil {
			return nil, fmt.Errorf("query %q: %w", bq.Query, err)
		}
		fmt.Fprintf(f.io.ErrOut, "simulator: %d searches (%s: %q)\n", n, bq.Name, bq.Query)
		name := fmt.Sprintf("simulator: searches/s, --limit 100, %s", bq.Name)
		if bq.Query != "" {
			name += ": " + bq.Query
		}
		rows = append(rows, benchRankRow{Measure: name, Vastfleet: rate, Unit: "1/s"})
	}

	all, rss, err := timeProcess(ctx, self, "--market", "sim", "--api-url", url, "--data-dir", filepath.Join(simDir, "client"),
		"search", "--all", "--json", "-n", "--by", "vcpu", benchRankQuery)
	if err != nil {
		return nil, fmt.Errorf("search --all: %w", err)
	}
	size := fmt.Sprintf("%d machines, ~%d offers", opts.Offers, opts.Offers*126/100)
	rows = append(rows,
		benchRankRow{Measure: "simulator (" + size + "): search --all --json, the recipe's filter", Vastfleet: all, Unit: "s"},
		benchRankRow{Measure: "simulator: search --all --json: peak memory", Vastfleet: rss, Unit: "MiB"})
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
