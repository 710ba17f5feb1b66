package fleet

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteInstancesNoneIsSaidOnTheErrorStream(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := WriteInstances(&out, &errOut, nil); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.HasPrefix(errOut.String(), "no instances") {
		t.Errorf("out %q, errOut %q", out.String(), errOut.String())
	}
}

func TestWriteOrphansSumsWhatTheyBill(t *testing.T) {
	var b bytes.Buffer
	if err := WriteOrphans(&b, nil); err != nil || b.Len() != 0 {
		t.Fatalf("no orphans wrote %q (%v)", b.String(), err)
	}
	err := WriteOrphans(&b, []OrphanView{{ID: 7, DPHTotal: 0.25, GPUName: "RTX 3090", NumGPUs: 2, Label: "vastfleet:x", Reason: "not in the store"},
		{ID: 8, State: "running", DPHTotal: 0.5, Fleet: "f"}})
	if err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{"7\tRTX 3090 x2\t0.250\tprovisioning\t-\tvastfleet:x\tnot in the store\n", "8\t x0\t0.500\trunning\tf\t\t\n",
		"2 orphan(s) bill $0.750/hr of compute"} {
		if !strings.Contains(got, want) {
			t.Errorf("orphans section lacks %q:\n%s", want, got)
		}
	}
}

func TestReporterSendsFailuresToTheErrorStream(t *testing.T) {
	var out, errOut bytes.Buffer
	r := Reporter{Out: &out, ErrOut: &errOut}
	r.report("stopped 1", false)
	r.report("could not stop 2", true)
	if out.String() != "stopped 1\n" || errOut.String() != "could not stop 2\n" {
		t.Errorf("out %q, errOut %q", out.String(), errOut.String())
	}
}

func TestListingRowsPutInstancesFirst(t *testing.T) {
	l := Listing{Instances: []InstanceView{{}}, Orphans: []OrphanView{{ID: 9}}}
	rows := l.Rows()
	if len(rows) != 2 {
		t.Fatalf("rows %v", rows)
	}
	if _, ok := rows[0].(InstanceView); !ok {
		t.Errorf("first row %T, want an instance", rows[0])
	}
	if o, ok := rows[1].(OrphanView); !ok || o.ID != 9 {
		t.Errorf("second row %#v, want the orphan", rows[1])
	}
	var out, errOut bytes.Buffer
	if err := (Listing{Orphans: []OrphanView{{ID: 9}}}).WriteText(&out, &errOut); err != nil {
		t.Fatal(err)
	}
	if errOut.Len() != 0 || !strings.Contains(out.String(), "ORPHANS") || strings.Contains(out.String(), "UPTIME") {
		t.Errorf("orphans only: out %q, errOut %q", out.String(), errOut.String())
	}
}
