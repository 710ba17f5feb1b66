package benchrank

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// RecipeFile is where the Python ranking recipe that `bench rank`
// compares against lives in a checkout: shared/bench beside (or inside)
// the tree.
const RecipeFile = "shared/bench/py_rank_baseline.py"

// FindRecipe looks for the recipe from dir upwards.
func FindRecipe(dir string) (string, error) {
	for {
		p := filepath.Join(dir, RecipeFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + RecipeFile + " here or in any parent directory (pass --recipe PATH)")
		}
		dir = parent
	}
}

// Header names the columns of Cells.
var Header = []string{"MEASURE", "VASTFLEET", "RECIPE", "UNIT", "VASTFLEET IS"}

// Cells is the row as bench rank's table shows it: the recipe's figure
// and the ratio blank where the recipe has no such measure.
func (r Row) Cells() []string {
	rec, ratio := "", ""
	if r.Recipe > 0 {
		rec = strconv.FormatFloat(r.Recipe, 'g', 4, 64)
		ratio = fmt.Sprintf("%.1fx", r.Ratio)
	}
	return []string{r.Measure, strconv.FormatFloat(r.Vastfleet, 'g', 4, 64), rec, r.Unit, ratio}
}
