package provider

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestClassify(t *testing.T) {
	api := func(status int, kind error) error {
		return fmt.Errorf("call: %w", &APIError{Method: "GET", Path: "/x", Status: status, Kind: kind})
	}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Class{}},
		{"cancelled", fmt.Errorf("list: %w", context.Canceled), Class{}},
		{"deadline", context.DeadlineExceeded, Class{}},
		{"cancelled while no answer came", errors.Join(context.Canceled, ErrNoAnswer), Class{}},
		{"maybe created", fmt.Errorf("%w: %w", ErrMaybeCreated, ErrNoAnswer), Class{}},
		{"maybe created by a 5xx", api(502, ErrMaybeCreated), Class{}},
		{"429", api(429, ErrRateLimited), Class{Transient: true, Refused: true}},
		{"5xx", api(503, ErrServer), Class{Transient: true}},
		{"no answer", fmt.Errorf("GET /x: %w", ErrNoAnswer), Class{Transient: true}},
		{"incomplete listing", ErrIncompleteListing, Class{Transient: true}},
		{"offer gone", api(404, ErrOfferGone), Class{Refused: true}},
		{"balance", api(402, ErrInsufficientBalance), Class{Refused: true}},
		{"auth", api(401, ErrAuth), Class{Refused: true}},
		{"not found", api(404, ErrNotFound), Class{Refused: true}},
		{"other 4xx", api(400, nil), Class{Refused: true}},
		{"other 5xx", api(500, nil), Class{Transient: true}},
		{"unknown", errors.New("something else"), Class{}},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %+v, want %+v", tc.name, tc.err, got, tc.want)
		}
	}
}

// The one classifier agrees with itself: a status and the sentinel a
// client maps it to read the same.
func TestClassifyStatusMatchesSentinels(t *testing.T) {
	for status, kind := range map[int]error{429: ErrRateLimited, 500: ErrServer, 502: ErrServer, 503: ErrServer, 504: ErrServer, 404: ErrNotFound, 401: ErrAuth} {
		if a, b := ClassifyStatus(status), Classify(kind); a != b {
			t.Errorf("status %d reads %+v, its sentinel %v reads %+v", status, a, kind, b)
		}
	}
}
