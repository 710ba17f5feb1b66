package fleet

import (
	"strings"
	"testing"
)

const testStore = "0a1b2c3d"

func TestLabelRoundTrip(t *testing.T) {
	for _, c := range []struct {
		fleet string
		id    int64
	}{{"a", 1}, {"train-7_b", 123456789}, {strings.Repeat("x", 64), 1<<62 + 5}} {
		for _, nonce := range []string{"", "00ff9a1c", NewNonce()} {
			l := Label(testStore, c.fleet, c.id, nonce)
			if len(l) > maxLabel {
				t.Fatalf("label %q longer than %d", l, maxLabel)
			}
			p, ok := ParseLabel(l)
			if !ok || p != (LabelParts{testStore, c.fleet, c.id, nonce}) {
				t.Errorf("ParseLabel(%q) = %+v, %v", l, p, ok)
			}
		}
	}
}

// TestParseOldLabels: labels written before nonces existed still name
// their store, fleet and intent, so reconcile keeps adopting them.
func TestParseOldLabels(t *testing.T) {
	p, ok := ParseLabel("vastfleet:0a1b2c3d:train-7:42")
	if !ok || p != (LabelParts{Store: "0a1b2c3d", Fleet: "train-7", Intent: 42}) {
		t.Errorf("old label parsed as %+v, %v", p, ok)
	}
	if got := Label("0a1b2c3d", "train-7", 42, ""); got != "vastfleet:0a1b2c3d:train-7:42" {
		t.Errorf("Label without a nonce = %q", got)
	}
}

func TestNewNonceDiffers(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		n := NewNonce()
		if !validNonce(n) || seen[n] {
			t.Fatalf("nonce %q invalid or repeated", n)
		}
		seen[n] = true
	}
}

func TestParseLabelRejects(t *testing.T) {
	for _, s := range []string{"", "vastfleet", "vastfleet:a", "vastfleet:a:1", "vastfleet:0a1b2c3d:a:",
		"vastfleet:0a1b2c3d:a:0", "vastfleet:0a1b2c3d:a:-1", "vastfleet:0a1b2c3d:a:01", "vastfleet:0a1b2c3d:A:1",
		"vastfleet:0a1b2c3d::1", "vastfleet:0a1b2c3d:a:1:2", "vastfleet:0A1B2C3D:a:1", "vastfleet:0a1b2c:a:1",
		"other:0a1b2c3d:a:1", "my job", "vastfleet:0a1b2c3d:" + strings.Repeat("x", 65) + ":1",
		"vastfleet:0a1b2c3d:a:99999999999999999999",
		"vastfleet:0a1b2c3d:a:1:0a1b2c3", "vastfleet:0a1b2c3d:a:1:0A1B2C3D", "vastfleet:0a1b2c3d:a:1:0a1b2c3d:0a1b2c3d",
		"vastfleet:0a1b2c3d:a:1:", "vastfleet:0a1b2c3d:a:0a1b2c3d"} {
		if p, ok := ParseLabel(s); ok {
			t.Errorf("ParseLabel(%q) = %+v, true; want not ours", s, p)
		}
	}
}

func TestValidateFleetName(t *testing.T) {
	for _, bad := range []string{"", "A", "a b", "a:b", "ü", strings.Repeat("a", 65)} {
		if ValidateFleetName(bad) == nil {
			t.Errorf("ValidateFleetName(%q) = nil", bad)
		}
	}
	for _, good := range []string{"a", "0", "exp-1_x", strings.Repeat("a", 64)} {
		if err := ValidateFleetName(good); err != nil {
			t.Errorf("ValidateFleetName(%q) = %v", good, err)
		}
	}
}

func FuzzParseLabel(f *testing.F) {
	f.Add("vastfleet:0a1b2c3d:a:1")
	f.Add("vastfleet:0a1b2c3d:x-y:42")
	f.Add("vastfleet:::")
	f.Add("vastfleet:0a1b2c3d:a:1:deadbeef")
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := ParseLabel(s)
		if ok && Label(p.Store, p.Fleet, p.Intent, p.Nonce) != s {
			t.Fatalf("ParseLabel(%q) ok but Label gives %q", s, Label(p.Store, p.Fleet, p.Intent, p.Nonce))
		}
	})
}
