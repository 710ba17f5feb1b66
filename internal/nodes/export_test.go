package nodes

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestExportHostfileAndTorchrun(t *testing.T) {
	t.Parallel()
	ns := []Node{{Name: "f-node-0", Rank: 0, ID: 1, Host: "10.0.0.1", NumGPU: 2}, {Name: "f-node-1", Rank: 1, ID: 2, Host: "10.0.0.2", CPUs: 8}}
	var b bytes.Buffer
	if err := Export(&b, ns, ExportOptions{Format: "hostfile", Mpich: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(b.String(), "f-node-0:2\nf-node-1:8\n") {
		t.Errorf("mpich hostfile:\n%s", b.String())
	}
	b.Reset()
	if err := Export(&b, ns, ExportOptions{Format: "torchrun", Script: "t.py"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "f-node-1: torchrun --nnodes=2 --node_rank=1 --nproc_per_node=1 --master_addr=10.0.0.1 --master_port=29500 t.py\n") {
		t.Errorf("torchrun:\n%s", b.String())
	}
	if err := Export(&b, ns, ExportOptions{Format: "yaml"}); !errors.As(err, new(*UsageError)) {
		t.Errorf("unknown format: %v, want a usage error", err)
	}
}

func TestSyncSummarySaysWhatWasSent(t *testing.T) {
	t.Parallel()
	s := SyncSummary{Files: 3, Nodes: 4, Relayed: 1, TreeBytes: 2048, Sent: 3 << 20, Archives: 512, LastNode: 1500 * time.Millisecond}
	want := "synced 3 files (2.0 KiB) to 4 nodes, 1 of them relayed by other nodes; this machine sent 3.0 MiB over SSH (512 B for the archives)\n" +
		"the last node had the tree 1.5s after the sync began\n"
	if got := s.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
