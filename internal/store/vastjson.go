package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"
)

// VastInstanceRecord is one entry of vast-instances.json, the interop file
// other tooling reads and writes. Its keys are exactly these.
type VastInstanceRecord struct {
	InstanceID     int64    `json:"instance_id"`
	OfferID        int64    `json:"offer_id"`
	GPUName        string   `json:"gpu_name"`
	NumGPUs        int      `json:"num_gpus"`
	DPH            float64  `json:"dph"`
	SSHURL         string   `json:"ssh_url"`
	SSHHost        string   `json:"ssh_host"`
	SSHPort        int      `json:"ssh_port"`
	CreatedAt      string   `json:"created_at"` // RFC 3339, UTC
	Status         string   `json:"status"`
	Experiment     string   `json:"experiment"`
	EstimatedHours *float64 `json:"estimated_hours"`
	EstimatedCost  *float64 `json:"estimated_cost"`
}

// vastFile names the file in import errors.
const vastFile = "vast-instances.json"

// ImportError says which entry and key of vast-instances.json is wrong.
// Index is the 0-based array index (as jq's .[3]); -1 for the file as a whole.
type ImportError struct {
	Index int
	Field string
	Err   error
}

func (e *ImportError) Error() string {
	switch {
	case e.Index < 0:
		return fmt.Sprintf("%s: %v", vastFile, e.Err)
	case e.Field == "":
		return fmt.Sprintf("%s: entry %d: %v", vastFile, e.Index, e.Err)
	default:
		return fmt.Sprintf("%s: entry %d: %q: %v", vastFile, e.Index, e.Field, e.Err)
	}
}

func (e *ImportError) Unwrap() error { return e.Err }

// ExportVastInstances writes the instances as a JSON array with 2-space
// indentation; gone ones only when includeGone.
func (s *Store) ExportVastInstances(ctx context.Context, w io.Writer, includeGone bool) error {
	insts, err := s.Instances(ctx, InstanceFilter{IncludeGone: includeGone})
	if err != nil {
		return err
	}
	recs := make([]VastInstanceRecord, 0, len(insts))
	for _, i := range insts {
		status := i.State
		if !i.Live() {
			status = StateGone // a last-seen "running" would mislead other tools
		}
		recs = append(recs, VastInstanceRecord{
			InstanceID:     i.ID,
			OfferID:        i.OfferID,
			GPUName:        i.GPUName,
			NumGPUs:        i.NumGPUs,
			DPH:            i.DPHTotal,
			SSHURL:         i.SSHURL,
			SSHHost:        i.SSHHost,
			SSHPort:        i.SSHPort,
			CreatedAt:      i.CreatedAt.UTC().Format(time.RFC3339),
			Status:         status,
			Experiment:     i.Experiment,
			EstimatedHours: i.EstHours,
			EstimatedCost:  i.EstCost,
		})
	}
	b, err := json.MarshalIndent(recs, "", "  ")
	if err != nil {
		return fmt.Errorf("store: export: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("store: export: %w", err)
	}
	return nil
}

// vastKeys lists every key; required ones must be present and non-null.
var vastKeys = []struct {
	name     string
	required bool
}{
	{"instance_id", true}, {"offer_id", true}, {"gpu_name", true}, {"num_gpus", true}, {"dph", true},
	{"ssh_url", false}, {"ssh_host", false}, {"ssh_port", false}, {"created_at", true}, {"status", true},
	{"experiment", false}, {"estimated_hours", false}, {"estimated_cost", false},
}

// ImportVastInstances reads a vast-instances.json array and upserts every
// entry (experiment kept in its column; fleet left as is, "" for new rows;
// state from status). Decoding is strict, and on any error nothing is
// written. Keys other than the thirteen known ones are errors; ssh_*,
// experiment and estimated_* may be null or absent.
func (s *Store) ImportVastInstances(ctx context.Context, r io.Reader, now time.Time) (int, error) {
	recs, err := decodeVastInstances(r)
	if err != nil {
		return 0, err
	}
	for idx, rec := range recs {
		created, _ := time.Parse(time.RFC3339, rec.CreatedAt)
		if err := CheckCreatedAt(created, now); err != nil {
			return 0, &ImportError{Index: idx, Field: "created_at", Err: err}
		}
	}
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for idx, rec := range recs {
			created, _ := time.Parse(time.RFC3339, rec.CreatedAt) // checked while decoding
			i := Instance{
				ID:         rec.InstanceID,
				OfferID:    rec.OfferID,
				GPUName:    rec.GPUName,
				NumGPUs:    rec.NumGPUs,
				DPHTotal:   rec.DPH,
				SSHURL:     rec.SSHURL,
				SSHHost:    rec.SSHHost,
				SSHPort:    rec.SSHPort,
				CreatedAt:  created,
				State:      rec.Status,
				Experiment: rec.Experiment,
				EstHours:   rec.EstimatedHours,
				EstCost:    rec.EstimatedCost,
			}
			if err := upsertInstance(ctx, tx, i, now); err != nil {
				return &ImportError{Index: idx, Err: err}
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(recs), nil
}

func decodeVastInstances(r io.Reader) ([]VastInstanceRecord, error) {
	var doc json.RawMessage
	dec := json.NewDecoder(r)
	if err := dec.Decode(&doc); err != nil {
		return nil, &ImportError{Index: -1, Err: fmt.Errorf("not valid JSON: %w", err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ImportError{Index: -1, Err: errors.New("trailing data after the JSON array")}
	}
	var raw []json.RawMessage
	if len(doc) == 0 || doc[0] != '[' || json.Unmarshal(doc, &raw) != nil {
		return nil, &ImportError{Index: -1, Err: fmt.Errorf("want a JSON array of instances, got %s", abbrev(doc))}
	}
	recs := make([]VastInstanceRecord, len(raw))
	seen := make(map[int64]int)
	for idx, entry := range raw {
		rec, err := decodeVastRecord(entry)
		if err != nil {
			err.Index = idx
			return nil, err
		}
		if first, dup := seen[rec.InstanceID]; dup {
			return nil, &ImportError{Index: idx, Field: "instance_id",
				Err: fmt.Errorf("instance %d is already listed at entry %d", rec.InstanceID, first)}
		}
		seen[rec.InstanceID] = idx
		recs[idx] = rec
	}
	return recs, nil
}

func decodeVastRecord(entry json.RawMessage) (VastInstanceRecord, *ImportError) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(entry, &fields); err != nil || fields == nil {
		return VastInstanceRecord{}, &ImportError{Err: fmt.Errorf("want a JSON object, got %s", abbrev(entry))}
	}
	// Unknown keys first, so a misspelt key is named rather than reported
	// as the correct one missing.
	known := make(map[string]bool, len(vastKeys))
	for _, k := range vastKeys {
		known[k.name] = true
	}
	for _, k := range sortedKeys(fields) {
		if !known[k] {
			return VastInstanceRecord{}, &ImportError{Field: k, Err: errors.New("unknown key")}
		}
	}
	for _, k := range vastKeys {
		v, ok := fields[k.name]
		if k.required && (!ok || bytes.Equal(bytes.TrimSpace(v), []byte("null"))) {
			return VastInstanceRecord{}, &ImportError{Field: k.name, Err: errors.New("required key is missing or null")}
		}
	}
	var rec VastInstanceRecord
	targets := map[string]any{
		"instance_id": &rec.InstanceID, "offer_id": &rec.OfferID, "gpu_name": &rec.GPUName,
		"num_gpus": &rec.NumGPUs, "dph": &rec.DPH, "ssh_url": &rec.SSHURL, "ssh_host": &rec.SSHHost,
		"ssh_port": &rec.SSHPort, "created_at": &rec.CreatedAt, "status": &rec.Status,
		"experiment": &rec.Experiment, "estimated_hours": &rec.EstimatedHours, "estimated_cost": &rec.EstimatedCost,
	}
	for _, k := range vastKeys {
		v, ok := fields[k.name]
		if !ok {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(v))
		d.DisallowUnknownFields()
		if err := d.Decode(targets[k.name]); err != nil {
			return VastInstanceRecord{}, &ImportError{Field: k.name, Err: fmt.Errorf("want %s, got %s", jsonKind(targets[k.name]), abbrev(v))}
		}
	}
	switch {
	case rec.InstanceID <= 0:
		return rec, &ImportError{Field: "instance_id", Err: fmt.Errorf("want an id > 0, got %d", rec.InstanceID)}
	case rec.OfferID <= 0:
		return rec, &ImportError{Field: "offer_id", Err: fmt.Errorf("want an id > 0, got %d", rec.OfferID)}
	case rec.NumGPUs < 0:
		return rec, &ImportError{Field: "num_gpus", Err: fmt.Errorf("want >= 0, got %d", rec.NumGPUs)}
	case rec.DPH < 0:
		return rec, &ImportError{Field: "dph", Err: fmt.Errorf("want >= 0, got %v", rec.DPH)}
	case rec.SSHPort < 0 || rec.SSHPort > 65535:
		return rec, &ImportError{Field: "ssh_port", Err: fmt.Errorf("want a port 0-65535, got %d", rec.SSHPort)}
	case rec.EstimatedHours != nil && *rec.EstimatedHours < 0:
		return rec, &ImportError{Field: "estimated_hours", Err: fmt.Errorf("want >= 0 or null, got %v", *rec.EstimatedHours)}
	case rec.EstimatedCost != nil && *rec.EstimatedCost < 0:
		return rec, &ImportError{Field: "estimated_cost", Err: fmt.Errorf("want >= 0 or null, got %v", *rec.EstimatedCost)}
	}
	if _, err := time.Parse(time.RFC3339, rec.CreatedAt); err != nil {
		return rec, &ImportError{Field: "created_at",
			Err: fmt.Errorf("parsing time %q: want RFC 3339 like 2026-12-02T14:00:00Z", rec.CreatedAt)}
	}
	return rec, nil
}

// MaxClockSkew is how far in the future a creation time may lie (clocks
// differ a little between machines); EarliestCreated is before any
// marketplace rental this tool can have made.
const MaxClockSkew = 5 * time.Minute

// EarliestCreated is the earliest creation time taken as real.
var EarliestCreated = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)

// CheckCreatedAt refuses a creation time that cannot be right: later than
// now (beyond MaxClockSkew) or before EarliestCreated. Accepting one would
// give negative uptime, a cost that grows wrongly, and a destroy that
// waits forever on a listing it misreads.
func CheckCreatedAt(created, now time.Time) error {
	switch {
	case created.Before(EarliestCreated):
		return fmt.Errorf("%s is before %d: not a real creation time", created.UTC().Format(time.RFC3339), EarliestCreated.Year())
	case created.After(now.Add(MaxClockSkew)):
		return fmt.Errorf("%s is in the future (now %s, allowed skew %s)", created.UTC().Format(time.RFC3339),
			now.UTC().Format(time.RFC3339), MaxClockSkew)
	}
	return nil
}

func jsonKind(p any) string {
	switch p.(type) {
	case *int64, *int:
		return "an integer"
	case *float64, **float64:
		return "a number"
	default:
		return "a string"
	}
}

func abbrev(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 40 {
		return string(b[:37]) + "..."
	}
	return string(b)
}

func sortedKeys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}
