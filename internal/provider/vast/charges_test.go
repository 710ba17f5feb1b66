package vast

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vastfleet/vastfleet/internal/provider"
)

// chargeJSON is one instance's charge for a day, in the simulator's (and
// vast's) shape.
func chargeJSON(id, day string, user string, gpu, storage string) string {
	meta := `{"instance_id":` + id + `,"day":` + day
	if user != "" {
		meta += `,"user_id":` + user
	}
	meta += "}"
	return `{"type":"instance","source":"instance-` + id + `","amount":` + sumOf(gpu, storage) +
		`,"start":` + day + `,"end":` + day + `,"description":"x","metadata":` + meta + `,"items":[` +
		`{"type":"gpu","amount":` + gpu + `,"start":` + day + `,"end":` + day + `,"items":[],"metadata":{}},` +
		`{"type":"storage","amount":` + storage + `,"start":` + day + `,"end":` + day + `,"items":[],"metadata":{}}]}`
}

// sumOf adds two amounts written as JSON numbers the test picks to add
// exactly.
func sumOf(a, b string) string {
	switch a + "+" + b {
	case "0.5+0.25":
		return "0.75"
	case "1+0.5":
		return "1.5"
	case "0.125+0.125":
		return "0.25"
	}
	panic(a + "+" + b)
}

// TestChargesPages: the client pages with after_token through every
// page, asks for instance charges in the days given, and returns each
// charge with its lines under vastfleet's kind names.
func TestChargesPages(t *testing.T) {
	t.Parallel()
	c, s, _, _ := newStub(t,
		jsonAnswer(200, `{"results":[`+chargeJSON("11", "1800000000", "7", "0.5", "0.25")+`,`+chargeJSON("12", "1800000000", "7", "1", "0.5")+
			`],"count":2,"total":3,"next_token":"tok2"}`),
		jsonAnswer(200, `{"results":[`+chargeJSON("11", "1800086400", "7", "0.125", "0.125")+`],"count":1,"total":3,"next_token":null}`),
	)
	from := time.Unix(1800000000+3600, 0)
	got, err := c.Charges(context.Background(), provider.ChargeQuery{From: from, To: from.Add(48 * time.Hour), Account: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].InstanceID != 11 || got[1].InstanceID != 12 || got[2].Day != time.Unix(1800086400, 0).UTC() {
		t.Fatalf("charges %+v", got)
	}
	if l := got[1].Lines; len(l) != 2 || l[0].Kind != provider.ChargeCompute || l[0].Amount != 1 || l[1].Kind != provider.ChargeStorage || l[1].Amount != 0.5 {
		t.Errorf("lines %+v", l)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].Path != "/api/v0/charges/" {
		t.Fatalf("requests %+v", reqs)
	}
	q0, _ := url.ParseQuery(reqs[0].RawQuery)
	q1, _ := url.ParseQuery(reqs[1].RawQuery)
	if f := q0.Get("select_filters"); !strings.Contains(f, `"gte":1799971200`) || !strings.Contains(f, `"type":{"in":["instance"]}`) {
		t.Errorf("select_filters %s: want the first day from its start, instance charges", f)
	}
	if q0.Get("after_token") != "" || q1.Get("after_token") != "tok2" || q1.Get("select_filters") != q0.Get("select_filters") {
		t.Errorf("paging: %q then %q", reqs[0].RawQuery, reqs[1].RawQuery)
	}
}

// TestChargesBadAnswers: an answer that does not parse, one cut short,
// one whose pages do not reach the total, one whose items do not add up,
// and one for another account each fail with their own error; none is
// ever a bill of $0.
func TestChargesBadAnswers(t *testing.T) {
	t.Parallel()
	ok := chargeJSON("11", "1800000000", "7", "0.5", "0.25")
	for _, tc := range []struct {
		name    string
		answers []http.HandlerFunc
		want    error
		msg     string
	}{
		{"not json", []http.HandlerFunc{answer(200, "application/json", `<html>maintenance</html>`)}, provider.ErrChargesUnreadable, "could not be read"},
		{"html", []http.HandlerFunc{answer(200, "text/html", `<html>maintenance</html>`)}, provider.ErrChargesUnreadable, "not JSON"},
		{"cut short", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+ok[:len(ok)/2])}, provider.ErrChargesUnreadable, "unexpected end"},
		{"no total", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+ok+`]}`)}, provider.ErrChargesUnreadable, "no total"},
		{"short of the total", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+ok+`],"count":1,"total":4,"next_token":null}`)}, provider.ErrChargesPartial, "hold 1 charges but the total is 4"},
		{"count lies", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+ok+`],"count":3,"total":3,"next_token":null}`)}, provider.ErrChargesPartial, "holds 1"},
		{"total moves", []http.HandlerFunc{
			jsonAnswer(200, `{"results":[`+ok+`],"count":1,"total":2,"next_token":"a"}`),
			jsonAnswer(200, `{"results":[`+chargeJSON("12", "1800000000", "7", "1", "0.5")+`],"count":1,"total":5,"next_token":null}`)}, provider.ErrChargesPartial, "changed from 2 to 5"},
		{"token repeats", []http.HandlerFunc{
			jsonAnswer(200, `{"results":[`+ok+`],"count":1,"total":9,"next_token":"a"}`),
			jsonAnswer(200, `{"results":[`+chargeJSON("12", "1800000000", "7", "1", "0.5")+`],"count":1,"total":9,"next_token":"a"}`)}, provider.ErrChargesPartial, "repeated"},
		{"items short", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+strings.Replace(ok, `"amount":0.75`, `"amount":0.95`, 1)+`],"count":1,"total":1,"next_token":null}`)}, provider.ErrChargesPartial, "items sum to $0.750000"},
		{"another account", []http.HandlerFunc{jsonAnswer(200, `{"results":[`+chargeJSON("11", "1800000000", "8", "0.5", "0.25")+`],"count":1,"total":1,"next_token":null}`)}, provider.ErrChargesOtherAccount, "user_id 8, not this key's account 7"},
		{"no instance", []http.HandlerFunc{jsonAnswer(200, `{"results":[{"type":"instance","amount":1,"start":1800000000,"items":[],"metadata":{}}],"count":1,"total":1}`)}, provider.ErrChargesUnreadable, "no instance id"},
		{"no amount", []http.HandlerFunc{jsonAnswer(200, `{"results":[{"type":"instance","source":"instance-3","start":1800000000,"items":[],"metadata":{}}],"count":1,"total":1}`)}, provider.ErrChargesUnreadable, "no amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, _, _, _ := newStub(t, tc.answers...)
			got, err := c.Charges(context.Background(), provider.ChargeQuery{From: time.Unix(1800000000, 0), To: time.Unix(1800100000, 0), Account: 7})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) || got != nil {
				t.Errorf("got %v, %v; want %v mentioning %q", got, err, tc.want, tc.msg)
			}
		})
	}
}

// TestChargesCutMidTransfer: the server promises more bytes than it
// sends and hangs up; the client retries the read and then fails,
// never returning the part that came.
func TestChargesCutMidTransfer(t *testing.T) {
	t.Parallel()
	c, s, _, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "5000")
		w.WriteHeader(200)
		w.Write([]byte(`{"results":[],"count":0,"total":0}`))
	})
	got, err := c.Charges(context.Background(), provider.ChargeQuery{From: time.Unix(1800000000, 0), To: time.Unix(1800100000, 0)})
	if err == nil || got != nil {
		t.Fatalf("got %v, %v; want an error", got, err)
	}
	if n := len(s.requests()); n < 2 {
		t.Errorf("%d requests: a read cut short is retried", n)
	}
	t.Logf("error: %v", err)
}
