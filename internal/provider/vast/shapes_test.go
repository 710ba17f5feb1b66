package vast

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vastfleet/vastfleet/internal/market"
	"github.com/vastfleet/vastfleet/internal/provider"
)

// shape is one answer vast has sent or documents (testdata/shapes), and
// what the client must make of it.
type shape struct {
	Source   string          `json:"source"`
	Call     string          `json:"call"` // list, show, search, create, user, destroy
	Status   int             `json:"status"`
	Body     json.RawMessage `json:"body"`
	BodyText string          `json:"body_text"` // a body that is not JSON
	Want     struct {
		Err         string `json:"err"` // "", any, auth, notfound, incomplete, offergone, balance, ratelimited
		Rows        *int   `json:"rows"`
		Quarantined int    `json:"quarantined"`
		ID          int64  `json:"id"`
	} `json:"want"`
}

var shapeErrs = map[string]error{
	"auth": provider.ErrAuth, "notfound": provider.ErrNotFound, "incomplete": provider.ErrIncompleteListing,
	"offergone": provider.ErrOfferGone, "balance": provider.ErrInsufficientBalance, "ratelimited": provider.ErrRateLimited,
}

// TestResponseShapes feeds every answer shape in testdata/shapes (taken
// from shared/vast-api.md, vast's docs and the official CLI's tests)
// through the real client over HTTP and checks what it reads: rows,
// quarantined rows, ids and the kind of error.
func TestResponseShapes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/shapes/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("%d shapes, want at least 20", len(files))
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var s shape
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			h := jsonAnswer(s.Status, string(s.Body))
			if s.BodyText != "" {
				h = answer(s.Status, "text/plain", s.BodyText)
			}
			c, _, _, _ := newStub(t, h)
			ctx := context.Background()
			var (
				ids  []int64
				quar int
				rows = -1
				cerr error
			)
			switch s.Call {
			case "list":
				var l provider.Listing
				l, cerr = c.ListInstances(ctx)
				rows = len(l.Instances)
				for _, in := range l.Instances {
					ids = append(ids, in.ID)
					if in.Quarantined() {
						quar++
					}
				}
			case "show":
				var in provider.Instance
				in, cerr = c.ShowInstance(ctx, 5)
				ids = []int64{in.ID}
				if in.Quarantined() {
					quar++
				}
			case "search":
				var offers []market.Offer
				offers, cerr = c.SearchOffers(ctx, market.Query{})
				rows = len(offers)
				for _, o := range offers {
					ids = append(ids, o.ID)
				}
			case "create":
				var cr provider.Created
				cr, cerr = c.CreateInstance(ctx, 1, provider.CreateRequest{Image: "x", Disk: 10})
				ids = []int64{cr.NewContract}
			case "user":
				var u provider.User
				u, cerr = c.CurrentUser(ctx)
				ids = []int64{u.ID}
			case "destroy":
				cerr = c.DestroyInstance(ctx, 5)
			default:
				t.Fatalf("unknown call %q", s.Call)
			}
			switch want := s.Want.Err; {
			case want == "" && cerr != nil:
				t.Fatalf("%s: %v", s.Source, cerr)
			case want == "any" && cerr == nil, want != "" && want != "any" && !errors.Is(cerr, shapeErrs[want]):
				t.Fatalf("%s: err %v, want %s", s.Source, cerr, want)
			case want != "":
				return
			}
			if s.Want.Rows != nil && rows != *s.Want.Rows {
				t.Errorf("%s: %d rows, want %d", s.Source, rows, *s.Want.Rows)
			}
			if quar != s.Want.Quarantined {
				t.Errorf("%s: %d rows quarantined, want %d", s.Source, quar, s.Want.Quarantined)
			}
			if s.Want.ID != 0 && (len(ids) == 0 || ids[0] != s.Want.ID) {
				t.Errorf("%s: ids %v, want the first %d", s.Source, ids, s.Want.ID)
			}
		})
	}
}
