package launch

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

func TestDbgVastfleet(t *testing.T) {
	if os.Getenv("DBG") == "" {
		t.Skip()
	}
	count, _ := strconv.Atoi(os.Getenv("DBG"))
	e, err := newSimEnv(context.Background(), 3, 4000, BenchFaults(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	spec := BenchSpec(StrategyVastfleet, count, 10*time.Minute)
	if os.Getenv("CLI") != "" {
		spec.ReleaseTimeout = 0
	}
	start := e.clock.Now()
	reasons := map[string]int{}
	sum, err := Run(context.Background(), e.m, spec, simCandidates(e.mkt, 10), func(ev Event) {
		if ev.Event == EvFailed || ev.Event == EvDestroyed || ev.Event == EvRelease || ev.Event == EvDeadline || ev.Event == EvCap || ev.Event == EvWarn {
			k := ev.Event + ": " + ev.Msg
			if len(k) > 60 {
				k = k[:60]
			}
			reasons[fmt.Sprintf("%s @%.0fm", k, ev.At.Sub(start).Minutes())]++
		}
		if ev.Event == EvProgress && os.Getenv("V") != "" {
			p := ev.Progress
			fmt.Printf("%5.2fm boot=%d park=%d rel=%d ready=%d failed=%d rented=%d\n", ev.At.Sub(start).Minutes(), p.Booting, p.Parked, p.Releasing, p.Ready, p.Failed, p.Rented)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for k := range reasons {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	for _, k := range ks {
		fmt.Println(reasons[k], k)
	}
	fmt.Printf("ready %d rented %d failed %d\n", sum.Ready, sum.Rented, sum.Failed)
}
