package nodes

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/vastfleet/vastfleet/internal/store"
)

// Running are the instances among ids that the store has running: the
// ones whose results a destroy would delete.
func Running(ctx context.Context, st *store.Store, ids []int64) []int64 {
	var running []int64
	for _, id := range ids {
		r, err := st.Instance(ctx, id)
		if err == nil && r.State == "running" && r.GoneAt.IsZero() {
			running = append(running, id)
		}
	}
	return running
}

// CollectFirst is destroy --collect: every node's results into
// to/<fleet>/<node>/, each noted on log, refusing the destroy when a node
// could not be collected.
func (o *Ops) CollectFirst(ctx context.Context, ns []Node, resultsDir, to string, log io.Writer) error {
	rows, err := o.Collect(ctx, ns, resultsDir, to, 64)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Error != "" {
			return fmt.Errorf("nothing destroyed: collecting from instance %d failed: %s", r.ID, r.Error)
		}
		fmt.Fprintf(log, "collected %d file(s) from instance %d into %s\n", r.Fetched, r.ID, r.Dir)
	}
	return nil
}

// UncollectedError refuses a destroy that would delete the results left
// (Uncollected's answer), in the order of ids; nil when none are left.
func UncollectedError(ids []int64, left map[int64]string) error {
	if len(left) == 0 {
		return nil
	}
	var lines []string
	for _, id := range ids {
		if why, ok := left[id]; ok {
			lines = append(lines, fmt.Sprintf("instance %d: %s", id, why))
		}
	}
	return fmt.Errorf("nothing destroyed: destroying deletes these results forever:\n  %s\nrun `vastfleet collect --id ID` first, or pass --force", strings.Join(lines, "\n  "))
}
