package vast

import (
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

func TestSearchBodyJSONCompactOrSorted(t *testing.T) {
	q, _, err := market.Parse("num_gpus=1", market.ParseOptions{Type: "on-demand", Order: "score-", Storage: 5})
	if err != nil {
		t.Fatal(err)
	}
	method, path, body, err := SearchBodyJSON(q, true, false)
	if err != nil || method != "PUT" || path != "/api/v0/search/asks/" || !strings.HasPrefix(string(body), `{"select_cols":["*"],"q":{`) {
		t.Fatalf("new form: %s %s %s (%v)", method, path, body, err)
	}
	_, _, sorted, err := SearchBodyJSON(q, true, true)
	if err != nil || !strings.HasPrefix(string(sorted), "{\n  \"q\": {") || !strings.Contains(string(sorted), "\n  \"select_cols\": [\n    \"*\"\n  ]") {
		t.Errorf("sorted body:\n%s (%v)", sorted, err)
	}
}
