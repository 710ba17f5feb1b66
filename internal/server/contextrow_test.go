package server

import (
	"slices"
	"testing"
)

func TestContextRowCellsMarkTheCurrentAndTheToken(t *testing.T) {
	got := ContextRow{Name: "prod", URL: "https://h:8480", Current: true, HasToken: true}.Cells()
	if want := []string{"*", "prod", "https://h:8480", "yes"}; !slices.Equal(got, want) || len(got) != len(ContextHeader) {
		t.Errorf("cells %q, want %q", got, want)
	}
	if got := (ContextRow{Name: "dev"}).Cells(); got[0] != "" || got[3] != "" {
		t.Errorf("cells %q", got)
	}
}
