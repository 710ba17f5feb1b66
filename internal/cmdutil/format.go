package cmdutil

import (
	"fmt"
	"io"
	"strconv"
)

// Score shows a ranking score with the digits its size deserves.
func Score(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.4f", v)
	}
}

// Num shows a count that may be fractional (vCPUs): whole as an integer.
func Num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprintf("%.1f", v)
}

// GB shows a marketplace MB figure in GB, as the vastai CLI does (÷1000).
func GB(mb float64) string { return fmt.Sprintf("%.0f GB", mb/1000) }

// Dash is s, or "-" for an empty cell.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteTable writes rows under the columns as a table.
func WriteTable(w io.Writer, cols []string, rows [][]string) error {
	t := NewTable(w, cols...)
	for _, r := range rows {
		t.Row(r...)
	}
	return t.Flush()
}
