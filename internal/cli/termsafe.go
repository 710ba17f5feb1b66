package cli

import "github.com/vastfleet/vastfleet/internal/termsafe"

// termSafe is termsafe.Line: a marketplace field, an error or a table
// cell on its way to the terminal.
func termSafe(s string) string { return termsafe.Line(s) }
