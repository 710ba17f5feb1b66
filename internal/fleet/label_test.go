package fleet

import (
	"strings"
	"testing"
)

func TestLabelRoundTrip(t *testing.T) {
	for _, c := range []struct {
		fleet string
		id    int64
	}{{"a", 1}, {"train-7_b", 123456789}, {strings.Repeat("x", 64), 1<<62 + 5}} {
		l := Label(c.fleet, c.id)
		if len(l) > maxLabel {
			t.Fatalf("label %q longer than %d", l, maxLabel)
		}
		f, id, ok := ParseLabel(l)
		if !ok || f != c.fleet || id != c.id {
			t.Errorf("ParseLabel(%q) = %q, %d, %v", l, f, id, ok)
		}
	}
}

func TestParseLabelRejects(t *testing.T) {
	for _, s := range []string{"", "vastfleet", "vastfleet:a", "vastfleet:a:", "vastfleet:a:0", "vastfleet:a:-1",
		"vastfleet:a:01", "vastfleet:A:1", "vastfleet::1", "vastfleet:a:1:2", "other:a:1", "my job",
		"vastfleet:" + strings.Repeat("x", 65) + ":1", "vastfleet:a:99999999999999999999"} {
		if f, id, ok := ParseLabel(s); ok {
			t.Errorf("ParseLabel(%q) = %q, %d, true; want not ours", s, f, id)
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
	f.Add("vastfleet:a:1")
	f.Add("vastfleet:x-y:42")
	f.Add("vastfleet::")
	f.Fuzz(func(t *testing.T, s string) {
		fl, id, ok := ParseLabel(s)
		if ok && Label(fl, id) != s {
			t.Fatalf("ParseLabel(%q) ok but Label gives %q", s, Label(fl, id))
		}
	})
}
