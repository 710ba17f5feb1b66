package plan

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoForbiddenDeps keeps plan pure: offers come in as data, so it must
// never link net/http, a provider or the simulator.
func TestNoForbiddenDeps(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go not on PATH")
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || strings.HasPrefix(dep, "net/http/") || dep == "database/sql" ||
			strings.Contains(dep, "/internal/provider") || strings.Contains(dep, "/internal/sim") {
			t.Errorf("package plan depends on %s", dep)
		}
	}
}
