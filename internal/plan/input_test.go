package plan

import (
	"os"
	"path/filepath"
	"testing"
)

// Flags the user typed win over the task file; flags left at their
// defaults do not blank the file's fields.
func TestInputFlagsOverrideTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "vastfleet.toml")
	if err := os.WriteFile(file, []byte("[task]\nmodel = \"13b\"\nhours = 2\nprecision = \"bf16\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Input{File: file, Flags: Task{Hours: 4}, Given: []string{"file", "hours"}, Train: true}.Task()
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "13b" || got.Hours != 4 || got.Precision != "bf16" || got.Mode != "finetune" {
		t.Errorf("task %+v: want the file's model and precision, the flag's hours, finetune", got)
	}
	if _, err := (Input{}).Task(); err == nil {
		t.Error("no model and no params: want an error")
	}
}
