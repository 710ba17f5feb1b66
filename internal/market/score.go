package market

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// Scorer rates an offer; higher is better.
type Scorer interface {
	Score(o *Offer) float64
	Name() string
}

// ScoreKinds are the built-in scorers ScoreBy knows.
var ScoreKinds = []string{"vcpu", "gpu", "dlperf", "useful"}

// ScoreBy returns a built-in scorer: "vcpu" (cpu_cores_effective per $/h),
// "gpu" (relative GPU speed × num_gpus per $/h), "dlperf" (dlperf per $/h)
// or "useful" (useful nodes per dollar, the inverse of the expected price
// of a node ready in time and kept, see Useful; the caller sets its
// image, deadline and host records).
func ScoreBy(kind string) (Scorer, error) {
	switch kind {
	case "useful":
		return &Useful{Deadline: 10 * time.Minute}, nil
	case "vcpu", "gpu", "dlperf":
		name, qty := Quantity(kind)
		return perDollar{kind, name, qty}, nil
	}
	return nil, fmt.Errorf("unknown score kind %q; use one of %s, or an expression", kind, strings.Join(ScoreKinds, ", "))
}

// Quantity is what a per-dollar score kind counts of an offer, and its
// name: "vcpu" cpu_cores_effective, "gpu" relative GPU speed × num_gpus,
// "dlperf" dlperf. Any other kind (useful, an expression) counts
// cpu_cores_effective: what the offer is rented for, as a job judges
// what a node delivered per unit its listing advertised.
func Quantity(kind string) (string, func(*Offer) float64) {
	switch kind {
	case "gpu":
		g := &gpuSpeeds{}
		return "gpu_speed*num_gpus", func(o *Offer) float64 { return g.speed(o.GPUName) * float64(o.NumGPUs) }
	case "dlperf":
		return "dlperf", func(o *Offer) float64 { return o.DLPerf }
	}
	return "cpu_cores_effective", func(o *Offer) float64 { return o.CPUCoresEffective }
}

// perDollar divides a quantity by dph_total; a non-positive price scores 0.
type perDollar struct {
	name    string
	qtyName string
	qty     func(*Offer) float64
}

func (p perDollar) Factors(o *Offer) []Factor {
	return []Factor{{p.qtyName, p.qty(o)}, {"dph_total", o.DPHTotal}}
}

func (p perDollar) Name() string { return p.name }

func (p perDollar) Score(o *Offer) float64 {
	if o.DPHTotal <= 0 {
		return 0
	}
	return p.qty(o) / o.DPHTotal
}

// gpuSpeeds caches GPUSpeed by name: the lookup normalises strings, which is
// too slow to repeat for every offer of a large market.
type gpuSpeeds struct{ m sync.Map }

func (g *gpuSpeeds) speed(name string) float64 {
	if v, ok := g.m.Load(name); ok {
		return v.(float64)
	}
	s := GPUSpeed(name)
	g.m.Store(name, s)
	return s
}

// exprScorer evaluates a compiled expr-lang program over offer fields.
type exprScorer struct {
	src  string
	prog *vm.Program
	used []string
	get  []field
	pool sync.Pool // *vm.VM
}

// Bounds on a score expression's cost. A score runs once per offer, on
// markets of a million offers, so one expression must stay a few thousand
// steps at most: these refuse the big ones when they are compiled and stop
// the rest at run time.
const (
	// MaxScoreExprLen is the longest expression accepted, in bytes.
	MaxScoreExprLen = 1000
	// maxScoreNodes caps the expression's syntax tree.
	maxScoreNodes = 200
	// maxScoreRange is the largest constant range (a..b) a loop may walk.
	maxScoreRange = 1000
	// scoreMemoryBudget bounds what one evaluation may allocate, in expr's
	// units (one per range or array element): it stops loops whose bounds
	// come from offer fields, which no compile-time check can size.
	scoreMemoryBudget = 10_000
)

// scoreBuiltinsOff are expr builtins a score has no use for and that cost
// without bound (repeat builds strings of any length) or read the wall
// clock, which would make a ranking differ from run to run.
var scoreBuiltinsOff = []string{"repeat", "now", "date", "duration", "timezone"}

// ScoreExpr compiles an expression over offer fields by json name (e.g.
// "cpu_cores_effective / dph_total * reliability") once; names, syntax,
// cost and the result type are checked here, not per offer.
func ScoreExpr(src string) (Scorer, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("score expression is empty")
	}
	if len(src) > MaxScoreExprLen {
		return nil, fmt.Errorf("score expression is %d bytes; at most %d are accepted", len(src), MaxScoreExprLen)
	}
	env := make(map[string]any, len(offerFields))
	for n, f := range offerFields {
		switch f.kind {
		case kindStr:
			env[n] = ""
		case kindBool:
			env[n] = false
		default:
			env[n] = 0.0
		}
	}
	opts := []expr.Option{expr.Env(env), expr.MaxNodes(maxScoreNodes)}
	for _, b := range scoreBuiltinsOff {
		opts = append(opts, expr.DisableBuiltin(b))
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, fmt.Errorf("score expression: %w", err)
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("score expression: %w", err)
	}
	if err := checkScoreCost(tree.Node); err != nil {
		return nil, fmt.Errorf("score expression: %w", err)
	}
	c := &identCollector{seen: map[string]bool{}}
	ast.Walk(&tree.Node, c)
	s := &exprScorer{src: src, prog: prog}
	for _, n := range c.names {
		if f, ok := offerFields[n]; ok {
			s.used = append(s.used, n)
			s.get = append(s.get, f)
		}
	}
	s.pool.New = func() any { return &vm.VM{MemoryBudget: scoreMemoryBudget} }
	// Run once on an empty offer so a non-numeric result, or one over the
	// run-time budget, is a compile error.
	trial := vm.VM{MemoryBudget: scoreMemoryBudget}
	out, err := trial.Run(prog, s.env(&Offer{}))
	if err != nil {
		return nil, fmt.Errorf("score expression: %w", err)
	}
	if _, ok := toFloat(out); !ok {
		return nil, fmt.Errorf("score expression must give a number, it gives %T", out)
	}
	return s, nil
}

// checkScoreCost refuses loops whose cost multiplies: a loop inside a
// loop's body (the nested loop that took 14.6 s for 64 offers), and ranges
// with constant bounds longer than maxScoreRange. Ranges bounded by offer
// fields are left to the run-time memory budget.
func checkScoreCost(root ast.Node) error {
	var err error
	ast.Walk(&root, visitFunc(func(n ast.Node) {
		if err != nil {
			return
		}
		switch n := n.(type) {
		case *ast.PredicateNode:
			inner := n.Node
			ast.Walk(&inner, visitFunc(func(m ast.Node) {
				if _, ok := m.(*ast.PredicateNode); ok && err == nil {
					err = errors.New("a loop inside a loop's body is not allowed (its cost grows with the product of the ranges)")
				}
			}))
		case *ast.BinaryNode:
			if n.Operator != ".." {
				return
			}
			lo, lok := n.Left.(*ast.IntegerNode)
			hi, hok := n.Right.(*ast.IntegerNode)
			if lok && hok && hi.Value-lo.Value+1 > maxScoreRange {
				err = fmt.Errorf("range %d..%d has %d elements; at most %d are allowed", lo.Value, hi.Value, hi.Value-lo.Value+1, maxScoreRange)
			}
		}
	}))
	return err
}

type visitFunc func(ast.Node)

func (f visitFunc) Visit(n *ast.Node) { f(*n) }

// Factors lists the numeric fields the expression reads, with their values.
func (s *exprScorer) Factors(o *Offer) []Factor {
	var fs []Factor
	for i, n := range s.used {
		if f := s.get[i]; f.kind != kindStr {
			fs = append(fs, Factor{n, f.num(o)})
		}
	}
	return fs
}

// Factor is one input to a score, for --explain.
type Factor struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Explain returns the factors behind a scorer's score for an offer, or nil
// when the scorer cannot say.
func Explain(s Scorer, o *Offer) []Factor {
	if e, ok := s.(interface{ Factors(*Offer) []Factor }); ok {
		return e.Factors(o)
	}
	return nil
}

type identCollector struct {
	names []string
	seen  map[string]bool
}

func (c *identCollector) Visit(n *ast.Node) {
	if id, ok := (*n).(*ast.IdentifierNode); ok && !c.seen[id.Value] {
		c.seen[id.Value] = true
		c.names = append(c.names, id.Value)
	}
}

func (s *exprScorer) Name() string { return s.src }

func (s *exprScorer) env(o *Offer) map[string]any {
	env := make(map[string]any, len(s.used))
	for i, n := range s.used {
		switch f := s.get[i]; f.kind {
		case kindStr:
			env[n] = f.str(o)
		case kindBool:
			env[n] = f.bln(o)
		default:
			env[n] = f.num(o)
		}
	}
	return env
}

// Score returns 0 when the expression fails at run time or gives no number.
func (s *exprScorer) Score(o *Offer) float64 {
	m := s.pool.Get().(*vm.VM)
	out, err := m.Run(s.prog, s.env(o))
	s.pool.Put(m)
	if err != nil {
		return 0
	}
	f, _ := toFloat(out)
	return f
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case bool:
		return b2f(x), true
	}
	return 0, false
}

// Ranked is an offer with vastfleet's score; its "score" key replaces the
// marketplace's own in JSON (the shallower field wins).
type Ranked struct {
	Offer
	Score float64 `json:"score"`
}

// Rank scores offers and sorts them best first: score descending, then
// dph_total and id ascending. An offer with no positive price, or whose score
// is not a finite number, scores 0 and ranks after all others.
func Rank(offers []Offer, s Scorer) []Ranked { return RankTop(offers, s, 0) }

// RankContext is Rank that stops when ctx ends (a user's Ctrl+C while a
// costly --score runs over a whole market), returning ctx's error.
func RankContext(ctx context.Context, offers []Offer, s Scorer) ([]Ranked, error) {
	idx, scores, err := rankIndices(ctx, offers, nil, s, 0)
	if err != nil {
		return nil, err
	}
	return rankedAt(offers, idx, scores), nil
}

// RankTop is Rank(offers, s)[:k] without sorting the rest: a bounded heap
// keeps the best k (k <= 0 ranks everything).
func RankTop(offers []Offer, s Scorer, k int) []Ranked {
	idx, scores, _ := rankIndices(context.Background(), offers, nil, s, k)
	return rankedAt(offers, idx, scores)
}

func rankedAt(offers []Offer, idx []int32, scores []float64) []Ranked {
	out := make([]Ranked, len(idx))
	for i, j := range idx {
		out[i] = Ranked{Offer: offers[j], Score: scores[i]}
	}
	return out
}

// RankIndices ranks the offers keep accepts (nil: all) by s, as Rank
// does, and returns their indices, best first (only the best k when k >
// 0). No offer is copied: it is the filter-score-sort core of a ranking.
func RankIndices(offers []Offer, keep func(*Offer) bool, s Scorer, k int) []int32 {
	idx, _, _ := rankIndices(context.Background(), offers, keep, s, k)
	return idx
}

// rankRow is one offer's place in a ranking.
type rankRow struct {
	rankKey
	i int32
}

func compareRows(a, b rankRow) int {
	if c := a.compare(&b.rankKey); c != 0 {
		return c
	}
	return cmp.Compare(a.i, b.i)
}

// parallelRankMin is the market size from which filtering, scoring and
// sorting are split across the processors.
const parallelRankMin = 1 << 14

// rankCheckEvery is how many offers are scored between two looks at ctx:
// often enough that a costly expression stops within moments, rarely
// enough to cost nothing measurable.
const rankCheckEvery = 2048

func rankIndices(ctx context.Context, offers []Offer, keep func(*Offer) bool, s Scorer, k int) (idx []int32, scores []float64, err error) {
	full := k <= 0 || k >= len(offers)
	parts := runtime.GOMAXPROCS(0)
	if len(offers) < parallelRankMin {
		parts = 1
	}
	// Each part filters and scores its share of the market; the parts,
	// in market order, are then sorted (or the best k picked) as one.
	sc := rankScratchPool.Get().(*rankScratch)
	defer rankScratchPool.Put(sc)
	for len(sc.parts) < parts {
		sc.parts = append(sc.parts, nil)
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(offers)/parts, (p+1)*len(offers)/parts
		wg.Go(func() {
			rows := sc.parts[p][:0]
			for i := lo; i < hi; i++ {
				if (i-lo)%rankCheckEvery == 0 && ctx.Err() != nil {
					return
				}
				o := &offers[i]
				if keep == nil || keep(o) {
					rows = append(rows, rankRow{newRankKey(o, s), int32(i)})
				}
			}
			sc.parts[p] = rows
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	n := 0
	for _, part := range sc.parts[:parts] {
		n += len(part)
	}
	rows := grow(sc.all, n)[:0]
	for _, part := range sc.parts[:parts] {
		rows = append(rows, part...)
	}
	sc.all = rows
	if full {
		sortRowsIn(rows, sc)
	} else {
		best := bestK(len(rows), k, func(a, b int32) int { return compareRows(rows[a], rows[b]) })
		picked := make([]rankRow, len(best))
		for n, j := range best {
			picked[n] = rows[j]
		}
		rows = picked
	}
	idx, scores = make([]int32, len(rows)), make([]float64, len(rows))
	for n := range rows {
		idx[n], scores[n] = rows[n].i, rows[n].score
	}
	return idx, scores, nil
}

// RankScan is RankTop over the offers in an offers file (see ScanOffers)
// that keep accepts. It holds a few numbers per offer kept, never the
// offers themselves, and decodes again only the k it returns. It stops
// with ctx's error when ctx ends.
func RankScan(ctx context.Context, data []byte, keep func(*Offer) bool, s Scorer, k int) ([]Ranked, error) {
	type kept struct {
		rankKey
		raw []byte
	}
	var rows []kept
	n := 0
	err := scanOffers(data, func(o *Offer, raw []byte) error {
		if n++; n%rankCheckEvery == 1 && ctx.Err() != nil {
			return ctx.Err()
		}
		if keep(o) {
			rows = append(rows, kept{newRankKey(o, s), raw})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	idx := bestK(len(rows), k, func(a, b int32) int { return rows[a].compare(&rows[b].rankKey) })
	out := make([]Ranked, len(idx))
	for i, j := range idx {
		n := 0
		err := ScanOffers(rows[j].raw, func(o *Offer) error {
			out[i] = Ranked{Offer: *o, Score: rows[j].score}
			n++
			return nil
		})
		if err != nil || n != 1 {
			return nil, fmt.Errorf("re-reading offer %d: %v", rows[j].id, err)
		}
	}
	return out, nil
}

// rankKey is what ranking compares: score descending (offers with no
// positive price or no finite score last), then dph_total and id ascending.
type rankKey struct {
	bad   bool
	score float64
	dph   float64
	id    int64
}

func newRankKey(o *Offer, s Scorer) rankKey {
	sc := s.Score(o)
	bad := o.DPHTotal <= 0 || !finite(sc)
	if bad {
		sc = 0
	}
	return rankKey{bad, sc, o.DPHTotal, o.ID}
}

func (a *rankKey) compare(b *rankKey) int {
	if a.bad != b.bad {
		if a.bad {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(b.score, a.score); c != 0 {
		return c
	}
	if c := cmp.Compare(a.dph, b.dph); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// Depth is the capacity of the top N ranked offers, summed.
type Depth struct {
	N     int     `json:"n"`
	VCPU  float64 `json:"vcpu"`
	RAMGB float64 `json:"ram_gb"`
	DPH   float64 `json:"dph_total"`
	GPUs  int     `json:"gpus"`
}

// DepthHeader names the columns of Depth.Cells.
var DepthHeader = []string{"TOP", "vCPU", "RAM GB", "GPUs", "$/hr", "vCPU per $/hr"}

// Cells is the row as market depth's table shows it, with the vCPU each
// $/hr buys.
func (d Depth) Cells() []string {
	per := 0.0
	if d.DPH > 0 {
		per = d.VCPU / d.DPH
	}
	return []string{strconv.Itoa(d.N), fmt.Sprintf("%.0f", d.VCPU), fmt.Sprintf("%.0f", d.RAMGB), strconv.Itoa(d.GPUs),
		fmt.Sprintf("%.3f", d.DPH), fmt.Sprintf("%.1f", per)}
}

// DepthTable sums the top N offers for each N in ns (ascending or not). N is
// the number of offers actually summed, which is less than asked when the
// market is thinner.
func DepthTable(ranked []Ranked, ns []int) []Depth {
	sorted := slices.Clone(ns)
	sort.Ints(sorted)
	out := make([]Depth, 0, len(ns))
	var acc Depth
	i := 0
	byN := map[int]Depth{}
	for _, n := range sorted {
		for ; i < n && i < len(ranked); i++ {
			o := &ranked[i].Offer
			acc.VCPU += o.CPUCoresEffective
			acc.RAMGB += o.CPURAM / 1000
			acc.DPH += o.DPHTotal
			acc.GPUs += o.NumGPUs
		}
		acc.N = i
		byN[n] = acc
	}
	for _, n := range ns {
		out = append(out, byN[n])
	}
	return out
}
