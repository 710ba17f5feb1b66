package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The dead-man switch stops or destroys its instance with the instance's
// key. Only an answer that says the instance is gone counts as done: a bad
// key (401, 403, or vast's 404 forms that mean auth) and a 404 that is not
// vast's (a proxy's page) leave the switch retrying, since the instance
// may still be running and billing.
func TestDeadmanTellsABadKeyFromAGoneInstance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		body   string
		done   bool
	}{
		{"accepted", 200, `{"success":true}`, true},
		{"gone", 404, `{"success":false,"error":"no_such_instance","msg":"Instance 5 not found."}`, true},
		{"gone, not_found", 404, `{"success":false,"error":"not_found","msg":"not found"}`, true},
		{"bad key 401", 401, `{"success":false,"error":"auth_error","msg":"Invalid user key"}`, false},
		{"bad key 403", 403, `{"success":false,"error":"forbidden","msg":"not allowed"}`, false},
		{"revoked key as 404", 404, `{"success":false,"error":"auth_error","msg":"Invalid user key"}`, false},
		{"stale session as 404", 404, `{"success":false,"msg":"Session expired. Please log in again."}`, false},
		{"404 text that means auth", 404, `{"detail":"Invalid API key"}`, false},
		{"a proxy's 404 page", 404, `<html><body>Not Found</body></html>`, false},
		{"refused with success false", 200, `{"success":false,"msg":"busy"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				if tc.body[0] == '{' {
					w.Header().Set("Content-Type", "application/json")
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			err := callVast(context.Background(), srv.Client(), http.MethodDelete, srv.URL+"/api/v0/instances/5/", `{}`, "k")
			if done := err == nil; done != tc.done {
				t.Errorf("HTTP %d %s: counted done %v (err %v), want %v", tc.status, tc.body, done, err, tc.done)
			}
		})
	}
}
