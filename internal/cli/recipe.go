package cli

import (
	"errors"
	"os"
	"path/filepath"
)

// recipeFile is where the Python ranking recipe that `bench rank` compares
// against lives in a checkout: shared/bench beside (or inside) the tree.
const recipeFile = "shared/bench/py_rank_baseline.py"

// findRecipe looks for the recipe from dir upwards.
func findRecipe(dir string) (string, error) {
	for {
		p := filepath.Join(dir, recipeFile)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no " + recipeFile + " here or in any parent directory (pass --recipe PATH)")
		}
		dir = parent
	}
}
