package benchrank

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFindRecipeLooksUpwards(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, RecipeFile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindRecipe(deep); err != nil || got != p {
		t.Errorf("FindRecipe = %q, %v; want %q", got, err, p)
	}
	if _, err := FindRecipe(t.TempDir()); err == nil {
		t.Error("found a recipe where there is none")
	}
}

func TestRowCellsLeaveTheRecipeBlankWhereItHasNoFigure(t *testing.T) {
	if got, want := (Row{Measure: "rank", Vastfleet: 12.5, Recipe: 125, Unit: "ms", Ratio: 10}).Cells(), []string{"rank", "12.5", "125", "ms", "10.0x"}; !slices.Equal(got, want) {
		t.Errorf("cells %q, want %q", got, want)
	}
	if got := (Row{Measure: "sim", Vastfleet: 100, Unit: "searches/s"}).Cells(); got[2] != "" || got[4] != "" || len(got) != len(Header) {
		t.Errorf("cells %q", got)
	}
}
