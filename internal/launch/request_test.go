package launch

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRequestRefusesContradictionsAsUsage(t *testing.T) {
	t.Parallel()
	ok := Request{Count: 2, Image: DefaultImage, Disk: DefaultDisk, Backfill: true}
	for name, c := range map[string]struct {
		r    Request
		a    Asked
		want string
	}{
		"interrupt": {ok, Asked{OnInterrupt: "maybe", Type: "on-demand"}, "--on-interrupt"},
		"resume":    {ok, Asked{Resume: "f", From: "r.json", Type: "on-demand"}, "--resume"},
		"bid type":  {ok, Asked{Type: "bid"}, "without --bid"},
		"outbid":    {Request{OnOutbid: "rebid"}, Asked{Type: "on-demand"}, "--on-outbid is for"},
		"items":     {ok, Asked{Items: "0..9", Type: "on-demand"}, "--items needs --coord"},
		"by":        {ok, Asked{Score: "x", By: "vcpu", Type: "on-demand"}, "pick one"},
	} {
		_, err := c.r.Check(c.a)
		if !errors.As(err, new(UsageError)) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a usage error with %q", name, err, c.want)
		}
	}
	bid := ok
	bid.Bid = "min"
	if typ, err := bid.Check(Asked{Type: "on-demand"}); err != nil || typ != "bid" {
		t.Errorf("--bid min: type %q, %v; want bid", typ, err)
	}
}

func TestRequestSpecNamesTheFleetAndChecksCounts(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 6, 48, 37, 0, time.UTC)
	spec, err := Request{Count: 3, Image: DefaultImage, Disk: DefaultDisk, Direct: true, Bid: "0.35"}.Spec(InterruptKeep, now)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Fleet != "fleet-20261203-064837" || spec.Create.Runtype != "ssh_direc ssh_proxy" || spec.Bid == nil || spec.Bid.Price != 0.35 || !spec.BudgetAuto {
		t.Errorf("spec: fleet %q runtype %q bid %+v budget auto %v", spec.Fleet, spec.Create.Runtype, spec.Bid, spec.BudgetAuto)
	}
	if _, err := (Request{Count: 2, MinReady: 3}).Spec(InterruptKeep, now); !errors.As(err, new(UsageError)) {
		t.Errorf("--min-ready above --count: %v, want a usage error", err)
	}
	if _, err := (Rent{Image: DefaultImage, Disk: 4}).CreateRequest(); !errors.As(err, new(UsageError)) {
		t.Errorf("rent --disk 4: %v, want a usage error", err)
	}
}
