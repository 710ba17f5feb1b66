package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/benchrank"
)

// recipeOrSkip finds the Python recipe and python3, or skips.
func recipeOrSkip(t *testing.T) (python, recipe string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	wd, _ := os.Getwd()
	r, err := benchrank.FindRecipe(wd)
	if err != nil {
		t.Skip(err)
	}
	return py, r
}

// The ranking of a saved offers dump is the Python recipe's, offer for
// offer, with the recipe's filters written in the query language.
func TestSearchFromRanksAsTheRecipeDoes(t *testing.T) {
	t.Parallel()
	py, recipe := recipeOrSkip(t)
	dir := t.TempDir()
	dump := filepath.Join(dir, "offers.json")
	gen, err := exec.Command(py, recipe, "--gen", "4000", "--seed", "2").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dump, gen, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, recipe, dump, "--min-cpu", "8", "--min-inet", "100", "--exclude-geo", "CN,VN", "--max-dph", "1.5", "--top", "300").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, line := range strings.Split(string(out), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] == "TOTAL" {
			break
		}
		want = append(want, f[0])
	}
	if len(want) != 300 {
		t.Fatalf("the recipe listed %d offers, want 300:\n%s", len(want), out)
	}
	e := newEnv(t)
	query := "cpu_cores_effective>8 inet_up>=100 inet_down>=100 geolocation notin [CN,VN] dph_total<=1.5"
	ranked := decode[[]struct {
		ID int64 `json:"id"`
	}](t, e.ok("search", "--from", dump, "-n", "--by", "vcpu", "--limit", "300", "--json", query).out)
	var got []string
	for _, r := range ranked {
		got = append(got, strconv.FormatInt(r.ID, 10))
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("search --from ranks differently from the recipe:\n got %v\nwant %v", got[:10], want[:10])
	}

	// The same offers as JSON lines on stdin, and as the search answer.
	var lines []string
	rows := decode[[]map[string]any](t, string(gen))
	for _, r := range rows {
		b, _ := json.Marshal(r)
		lines = append(lines, string(b))
	}
	for name, input := range map[string]string{
		"json lines":    strings.Join(lines, "\n"),
		"search answer": `{"offers": ` + string(gen) + `}`,
	} {
		r := e.runIn(input, "search", "--from", "-", "-n", "--by", "vcpu", "--limit", "5", query)
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", name, r.code, r.err)
		}
		for i, id := range want[:5] {
			if f := strings.Fields(strings.Split(r.out, "\n")[i+1]); f[0] != id {
				t.Fatalf("%s: row %d is %s, want %s\n%s", name, i+1, f[0], id, r.out)
			}
		}
	}
}

func TestSearchFromRefusesBadFiles(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte("[\n{\"id\": 1},\n{\"id\": oops}\n]"), 0o600)
	r := e.fails("search", "--from", bad, "-n", "--by", "vcpu")
	if !strings.Contains(r.err, "line 3") {
		t.Errorf("want the line of the error, got: %s", r.err)
	}
	r = e.fails("search", "--from", filepath.Join(dir, "missing.json"), "-n")
	if !strings.Contains(r.err, "missing.json") {
		t.Errorf("want the missing file named, got: %s", r.err)
	}
	r = e.fails("search", "--from", bad, "--all")
	if !strings.Contains(r.err, "--all") {
		t.Errorf("want --all refused with --from, got: %s", r.err)
	}
}
