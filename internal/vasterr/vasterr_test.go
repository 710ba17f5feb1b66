package vasterr

import "testing"

func TestAuthAndGone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status     int
		body       string
		auth, gone bool
	}{
		{401, `{"error":"auth_error","msg":"Invalid user key"}`, true, false},
		{403, `{"msg":"not allowed"}`, true, false},
		{403, `{"error":"insufficient_credit","msg":"balance too low"}`, false, false},
		{404, `{"error":"auth_error","msg":"Invalid user key"}`, true, false},
		{404, `{"success":false,"msg":"Session expired. Please log in again."}`, true, false},
		{404, `{"error":"no_such_instance","msg":"Instance 5 not found"}`, false, true},
		{404, `{"success":false}`, false, true},
		{404, `<html>Not Found</html>`, false, false},
		{400, `{"error":"invalid_id"}`, false, true},
		{500, `{"error":"server_error"}`, false, false},
	} {
		code, msg, isJSON := Parse([]byte(tc.body))
		if got := Auth(tc.status, code, msg); got != tc.auth {
			t.Errorf("%d %s: Auth %v, want %v", tc.status, tc.body, got, tc.auth)
		}
		if got := Gone(tc.status, code, msg, isJSON); got != tc.gone {
			t.Errorf("%d %s: Gone %v, want %v", tc.status, tc.body, got, tc.gone)
		}
	}
}
