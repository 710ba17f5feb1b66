package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/vastfleet/vastfleet/internal/clock"
	"github.com/vastfleet/vastfleet/internal/market"
)

// ErrWaitExpired: the price window never opened within --wait-max.
var ErrWaitExpired = errors.New("price condition not met in time")

// Metrics are the aggregates of the top-Count ranked offers a --wait-for
// condition reads.
type Metrics struct {
	N          int     // offers summed (fewer than Count when the market is thin)
	VCPU       float64 // cpu_cores_effective summed
	DPH        float64 // dph_total summed
	DPHPerVCPU float64 // DPH / VCPU
	RAMGB      float64
	GPUs       float64
}

// Aggregate sums the top count ranked offers.
func Aggregate(ranked []market.Ranked, count int) Metrics {
	var m Metrics
	for i := 0; i < len(ranked) && i < count; i++ {
		o := &ranked[i].Offer
		m.N++
		m.VCPU += o.CPUCoresEffective
		m.DPH += o.DPHTotal
		m.RAMGB += o.CPURAM / 1000
		m.GPUs += float64(o.NumGPUs)
	}
	if m.VCPU > 0 {
		m.DPHPerVCPU = m.DPH / m.VCPU
	}
	return m
}

func (m Metrics) value(name string) float64 {
	switch name {
	case "vcpu":
		return m.VCPU
	case "dph":
		return m.DPH
	case "dph_per_vcpu":
		return m.DPHPerVCPU
	case "ram_gb":
		return m.RAMGB
	case "gpus":
		return m.GPUs
	}
	return 0
}

// Term is one comparison of a Condition.
type Term struct {
	Metric string
	Op     string
	Value  float64
}

// Condition is a conjunction of terms, e.g. "vcpu>=5000 dph_per_vcpu<=0.002".
type Condition struct{ Terms []Term }

var waitMetrics = []string{"vcpu", "dph", "dph_per_vcpu", "ram_gb", "gpus"}

// ParseWaitFor parses a --wait-for expression: space-separated
// METRIC OP NUMBER terms, all of which must hold. Metrics: vcpu, dph,
// dph_per_vcpu, ram_gb, gpus; ops: >= <= > < =.
func ParseWaitFor(expr string) (Condition, error) {
	var c Condition
	for _, f := range strings.Fields(expr) {
		i := strings.IndexAny(f, "<>=")
		if i <= 0 {
			return c, fmt.Errorf("--wait-for %q: want METRIC OP NUMBER (e.g. vcpu>=5000)", f)
		}
		name, rest := f[:i], f[i:]
		op := rest[:1]
		if len(rest) > 1 && rest[1] == '=' && op != "=" {
			op = rest[:2]
		}
		num := rest[len(op):]
		known := false
		for _, m := range waitMetrics {
			known = known || m == name
		}
		if !known {
			return c, fmt.Errorf("--wait-for %q: unknown metric %q (use %s)", f, name, strings.Join(waitMetrics, ", "))
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return c, fmt.Errorf("--wait-for %q: %q is not a number", f, num)
		}
		c.Terms = append(c.Terms, Term{Metric: name, Op: op, Value: v})
	}
	if len(c.Terms) == 0 {
		return c, errors.New("--wait-for: empty condition")
	}
	return c, nil
}

// Holds reports whether every term holds for m.
func (c Condition) Holds(m Metrics) bool {
	for _, t := range c.Terms {
		v := m.value(t.Metric)
		ok := false
		switch t.Op {
		case ">=":
			ok = v >= t.Value
		case "<=":
			ok = v <= t.Value
		case ">":
			ok = v > t.Value
		case "<":
			ok = v < t.Value
		case "=":
			ok = v == t.Value
		}
		if !ok {
			return false
		}
	}
	return true
}

func (c Condition) String() string {
	parts := make([]string, len(c.Terms))
	for i, t := range c.Terms {
		parts[i] = t.Metric + t.Op + strconv.FormatFloat(t.Value, 'g', -1, 64)
	}
	return strings.Join(parts, " ")
}

// WaitFor polls the market every `every` until the condition holds over
// the top count offers, and returns that ranking; after maxWait it fails
// with ErrWaitExpired. A failed poll is retried at the next interval.
// every and maxWait are in clk's time (the marketplace's).
func WaitFor(ctx context.Context, cond Condition, count int, poll func(context.Context) ([]market.Ranked, error),
	every, maxWait time.Duration, clk clock.Clock) ([]market.Ranked, Metrics, error) {
	end := clk.Now().Add(maxWait)
	var last Metrics
	var lastErr error
	for {
		ranked, err := poll(ctx)
		if err == nil {
			last = Aggregate(ranked, count)
			if last.N >= count && cond.Holds(last) {
				return ranked, last, nil
			}
		} else {
			if ctx.Err() != nil {
				return nil, last, ctx.Err()
			}
			lastErr = err
		}
		if !clk.Now().Add(every).Before(end) {
			msg := fmt.Sprintf("%s: %s not met within %s (last: %d offers, vcpu %.0f, $%.3f/hr, $%.5f per vCPU-hr)",
				ErrWaitExpired, cond, maxWait, last.N, last.VCPU, last.DPH, last.DPHPerVCPU)
			if lastErr != nil {
				msg += "; last poll error: " + lastErr.Error()
			}
			return nil, last, fmt.Errorf("%w%s", ErrWaitExpired, strings.TrimPrefix(msg, ErrWaitExpired.Error()))
		}
		if err := clk.Sleep(ctx, every); err != nil {
			return nil, last, err
		}
	}
}

// WaitForWindow polls the market every 10 minutes until the top count
// offers meet asked (launch --wait-for), or max passes, saying so on log.
func WaitForWindow(ctx context.Context, asked string, count int, poll func(context.Context) ([]market.Ranked, error),
	max time.Duration, clk clock.Clock, log io.Writer) ([]market.Ranked, error) {
	cond, err := ParseWaitFor(asked)
	if err != nil {
		return nil, usagef("--wait-for: %v", err)
	}
	fmt.Fprintf(log, "waiting for %s (checking every 10m, at most %s)\n", asked, max)
	ranked, m, err := WaitFor(ctx, cond, count, poll, 10*time.Minute, max, clk)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "price window open: top %d give %.0f vCPU at $%.3f/hr\n", m.N, m.VCPU, m.DPH)
	return ranked, nil
}
