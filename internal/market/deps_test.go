package market

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoForbiddenDeps keeps market a leaf: it must never link net/http.
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
		if dep == "net/http" || strings.HasPrefix(dep, "net/http/") || dep == "database/sql" {
			t.Errorf("package market depends on %s", dep)
		}
	}
}
