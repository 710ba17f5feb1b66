package launch

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestBench(t *testing.T) {
	count := 100
	if v, err := strconv.Atoi(os.Getenv("VASTFLEET_BENCH_COUNT")); err == nil && v > 0 {
		count = v
	}
	start := time.Now()
	rows, err := Bench(context.Background(), BenchConfig{Seed: 3, Count: count, Deadline: 10 * time.Minute, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("count %d in %s\n%s", count, time.Since(start), BenchTable(rows))
}
