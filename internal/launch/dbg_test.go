package launch

import (
	"context"
	"fmt"
	"log/slog"
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
	f := BenchFaults()
	e, err := newSimEnv(context.Background(), 3, 4000, f, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.m.Log = slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn}))
	spec := BenchSpec(StrategyVastfleet, count, 10*time.Minute)
	start := e.clock.Now()
	reasons := map[string]int{}
	sum, err := Run(context.Background(), e.m, spec, simCandidates(e.mkt, 10), func(ev Event) {
		if ev.Event == EvFailed || ev.Event == EvDestroyed || ev.Event == EvRelease || ev.Event == EvDeadline || ev.Event == EvCap {
			k := ev.Event + ": " + ev.Msg
			if len(k) > 60 {
				k = k[:60]
			}
			reasons[fmt.Sprintf("%s @%.0fm", k, ev.At.Sub(start).Minutes())]++
		}
		if ev.Event == EvProgress && os.Getenv("V") != "" {
			p := ev.Progress
			fmt.Printf("%5.1fm boot=%d park=%d rel=%d ready=%d failed=%d rented=%d\n", ev.At.Sub(start).Minutes(), p.Booting, p.Parked, p.Releasing, p.Ready, p.Failed, p.Rented)
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
	fmt.Printf("%+v\n", sum)
}
