package search

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
)

// `search offers QUERY` is `search QUERY`, as with the vastai CLI, and a
// query or a limit the user got wrong is a QueryError.
func TestParseQuery(t *testing.T) {
	with, _, err := ParseQuery([]string{"offers", "num_gpus>=2"}, market.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	without, _, err := ParseQuery([]string{"num_gpus>=2"}, market.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(with)
	b, _ := json.Marshal(without)
	if string(a) != string(b) {
		t.Errorf("with offers: %s, without: %s", a, b)
	}
	for _, c := range []struct {
		words []string
		limit int
	}{{[]string{"num_gpus>=2"}, -1}, {[]string{"num_gpus>="}, 0}} {
		if _, _, err := ParseQuery(c.words, market.ParseOptions{Limit: c.limit}); !errors.As(err, new(*QueryError)) {
			t.Errorf("%v limit %d: %v, want a QueryError", c.words, c.limit, err)
		}
	}
}
