package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/vastfleet/vastfleet/internal/vasterr"
	"github.com/vastfleet/vastfleet/internal/wire"
)

// selfAct stops (PUT state=stopped) or destroys (DELETE) this instance
// through the marketplace API with the instance's own key, never an
// account key and never the vastai CLI (which prompts). It retries until
// the marketplace agrees or ctx ends, and returns ctx's error then.
func selfAct(ctx context.Context, cfg Config, policy string, log *slog.Logger) error {
	url := cfg.VastURL + "/api/v0/instances/" + strconv.FormatInt(cfg.InstanceID, 10) + "/"
	method, body := http.MethodPut, `{"state":"stopped"}`
	if policy == wire.PolicyDestroy {
		method, body = http.MethodDelete, `{}`
	}
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	backoff := 2 * cfg.retryBase
	for attempt := 1; ; attempt++ {
		err := callVast(ctx, client, method, url, body, cfg.ContainerKey)
		if err == nil {
			log.Error("dead-man switch: the marketplace accepted it", "policy", policy, "instance", cfg.InstanceID, "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Error("dead-man switch: the marketplace refused; retrying", "policy", policy, "attempt", attempt, "retry_in", backoff, "err", err)
		if !sleep(ctx, jitter(backoff)) {
			return ctx.Err()
		}
		backoff = min(2*backoff, maxSendBackoff)
	}
}

// callVast is one request; nil when the marketplace answered 2xx without
// "success": false (vast answers 200 with success false for some
// refusals), or said the instance is gone, which is the goal. A 404 is
// not always that: vast answers a revoked key or a stale session with 404
// too, and a proxy's 404 page is no answer from vast at all; those are
// errors, retried, since the instance may still run and bill.
func callVast(ctx context.Context, client *http.Client, method, url, body, key string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		code, msg, isJSON := vasterr.Parse(b)
		switch {
		case vasterr.Auth(resp.StatusCode, code, msg):
			return fmt.Errorf("%s %s: %d: the instance key was refused (%s); the instance is not known to be gone", method, url, resp.StatusCode, bytes.TrimSpace(b))
		case vasterr.Gone(resp.StatusCode, code, msg, isJSON):
			return nil
		}
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, bytes.TrimSpace(b))
	}
	var r struct {
		Success *bool  `json:"success"`
		Msg     string `json:"msg"`
	}
	if json.Unmarshal(b, &r) == nil && r.Success != nil && !*r.Success {
		return fmt.Errorf("%s %s: success false: %s", method, url, r.Msg)
	}
	return nil
}
