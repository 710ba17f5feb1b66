package scalebench

import (
	"bytes"
	"strings"
	"testing"
)

func TestPrinterWritesJSONLinesOrText(t *testing.T) {
	var js bytes.Buffer
	pr := NewPrinter(&bytes.Buffer{}, &js)
	pr.Phase(Phase{Event: "phase", Phase: "launch", Nodes: 3, OK: 3})
	if err := pr.Summary(Summary{Event: "summary", Nodes: 3}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], `{"event":"phase","phase":"launch"`) || !strings.HasPrefix(lines[1], `{"event":"summary","nodes":3`) {
		t.Errorf("JSON lines:\n%s", js.String())
	}
	var text bytes.Buffer
	pr = NewPrinter(&text, nil)
	pr.Phase(Phase{Event: "phase", Phase: "launch", Nodes: 3, OK: 3})
	if got := text.String(); !strings.Contains(got, "launch") || strings.Contains(got, "{") {
		t.Errorf("text:\n%s", got)
	}
}
