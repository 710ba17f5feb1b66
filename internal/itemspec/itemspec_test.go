package itemspec

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseItems(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "items.txt")
	if err := os.WriteFile(file, []byte("alpha\n\n  beta \r\nalpha\ngamma delta"), 0o600); err != nil {
		t.Fatal(err)
	}
	odd := filepath.Join(dir, "a=b")
	if err := os.WriteFile(odd, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		spec string
		want []string
	}{
		{"0..3", []string{"0", "1", "2", "3"}},
		{" 7 .. 7 ", []string{"7"}},
		{"-2..0", []string{"-2", "-1", "0"}},
		{"lr=0.1,0.01;bs=32,64", []string{"lr=0.1 bs=32", "lr=0.1 bs=64", "lr=0.01 bs=32", "lr=0.01 bs=64"}},
		{"seed=1,2,2,3", []string{"seed=1", "seed=2", "seed=3"}},
		{"a=1; b = x ,y;", []string{"a=1 b=x", "a=1 b=y"}},
		{file, []string{"alpha", "beta", "gamma delta"}},
		{"@" + odd, []string{"x"}},
	} {
		got, err := ParseItems(c.spec)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseItems(%q) = %q, %v; want %q", c.spec, got, err, c.want)
		}
	}
	if got, err := ParseItems("0..9999"); err != nil || len(got) != 10000 || got[9999] != "9999" {
		t.Errorf("0..9999: %d items, %v", len(got), err)
	}
}

func TestParseItemsRefuses(t *testing.T) {
	blank := filepath.Join(t.TempDir(), "blank")
	os.WriteFile(blank, []byte("\n \n"), 0o600)
	for spec, want := range map[string]string{
		"":                        "empty spec",
		"9..0":                    "backwards",
		"0..1000000":              "more than",
		"99999999999999999999..1": "64-bit",
		"lr=":                     "empty value",
		"lr=1;lr=2":               "twice",
		"=1,2":                    "want name=value",
		"a=" + manyValues(1000) + ";b=" + manyValues(1000) + ";c=1,2": "more than",
		"a=x y":            "space",
		"no-such-file.txt": "no such file",
		blank:              "no items",
	} {
		_, err := ParseItems(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseItems(%.40q) = %v, want an error saying %q", spec, err, want)
		}
	}
}

func manyValues(n int) string {
	v := make([]string, int(n))
	for i := range v {
		v[i] = strings.Repeat("v", 1) + string(rune('a'+i%26)) + strings.Repeat("z", i/26)
	}
	return strings.Join(v, ",")
}

func FuzzParseItems(f *testing.F) {
	for _, s := range []string{"0..9", "lr=0.1,0.01;bs=32,64", "a=1;b=2,3", "-5..-1", "x=,", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		if !rangeSpec.MatchString(spec) && !strings.Contains(spec, "=") {
			return // a file name: not what this fuzzes
		}
		got, err := ParseItems(spec)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > MaxItems {
			t.Fatalf("%q: %d items", spec, len(got))
		}
		seen := map[string]bool{}
		for _, v := range got {
			if v == "" || seen[v] {
				t.Fatalf("%q: empty or repeated item %q", spec, v)
			}
			seen[v] = true
		}
	})
}
