package vast

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// An instance row vast sends in a shape the client does not read (a count
// as a word) is quarantined: the rest of the listing is used, the row stays listed by its
// id as "unknown" (so nobody counts it gone), and it is logged once per
// client, not once per listing.
func TestListingQuarantinesOddRows(t *testing.T) {
	t.Parallel()
	page := `{"success":true,"total_instances":4,"next_token":null,"instances":[
	 {"id":11,"label":"a","actual_status":"running","ssh_host":"ssh1.vast.ai","ssh_port":20011,"extra_env":[]},
	 {"id":12,"label":"vf-odd","actual_status":"running","ports":[22,8080],"extra_env":[]},
	 {"id":13,"label":"vf-odd","actual_status":"loading","num_gpus":"two","extra_env":[]},
	 {"id":14,"label":"d","actual_status":"running","extra_env":[]}]}`
	c, _, _, logBuf := newStub(t, jsonAnswer(200, page))
	for range 3 {
		l, err := c.ListInstances(context.Background())
		if err != nil {
			t.Fatalf("one odd row failed the whole listing: %v", err)
		}
		if len(l.Instances) != 4 || l.Total != 4 {
			t.Fatalf("listing: %d rows, total %d; want all 4 listed", len(l.Instances), l.Total)
		}
		byID := map[int64]provider.Instance{}
		for _, in := range l.Instances {
			byID[in.ID] = in
		}
		if in := byID[11]; in.Quarantined() || in.SSHHost != "ssh1.vast.ai" || in.Status() != provider.StateRunning {
			t.Errorf("good row 11 read as %+v", in)
		}
		// Ports as a list of numbers (vast's own show-instance example)
		// read: they name the ports and publish none.
		if in := byID[12]; in.Quarantined() || in.Status() != provider.StateRunning || len(in.Ports) != 2 || in.Ports["8080/tcp"] != nil {
			t.Errorf("row 12 with ports as a list read as %+v", in)
		}
		if in, ok := byID[13]; !ok || !in.Quarantined() || in.Status() != provider.StateUnknown {
			t.Errorf("odd row 13: listed %v, quarantined %v, status %q; want listed, quarantined, unknown", ok, in.Quarantined(), in.Status())
		}
		if odd := byID[13]; odd.LabelText() != "vf-odd" {
			t.Errorf("quarantined row lost its label: %q", odd.LabelText())
		}
	}
	logs := logBuf.String()
	if n := strings.Count(logs, "instance=13"); n != 1 {
		t.Errorf("instance=13 logged %d times over 3 listings, want once:\n%s", n, logs)
	}
	if strings.Contains(logs, "instance=12") {
		t.Errorf("row 12, read, was logged as quarantined:\n%s", logs)
	}
}

// A row whose id cannot be read could be any instance: the listing then
// proves nothing absent and is incomplete.
func TestListingRowWithoutIDIsIncomplete(t *testing.T) {
	t.Parallel()
	page := `{"success":true,"total_instances":2,"next_token":null,"instances":[
	 {"id":11,"label":"a","actual_status":"running","extra_env":[]},
	 {"id":"x-12","label":"b","actual_status":"running","extra_env":[]}]}`
	noID := `{"success":true,"total_instances":2,"next_token":null,"instances":[
	 {"id":11,"label":"a","actual_status":"running","extra_env":[]},
	 {"label":"b","actual_status":"running","extra_env":[]}]}`
	for _, p := range []string{page, noID} {
		c, _, _, _ := newStub(t, jsonAnswer(200, p))
		_, err := c.ListInstances(context.Background())
		if !errors.Is(err, provider.ErrIncompleteListing) {
			t.Errorf("err %v, want ErrIncompleteListing", err)
		}
	}
}
