package market

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// MarshalJSON writes the flat body the CLI posts: one key per filter field
// holding its operator map, then order, type, limit (only when non-zero) and
// allocated_storage. encoding/json sorts the keys.
func (q Query) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(q.Filters)+4)
	for f, ops := range q.Filters {
		if ops == nil {
			ops = map[string]any{}
		}
		m[f] = ops
	}
	order := q.Order
	if order == nil {
		order = [][2]string{}
	}
	m["order"] = order
	m["type"] = q.Type
	if q.Limit != 0 {
		m["limit"] = q.Limit
	}
	m["allocated_storage"] = q.AllocatedStorage
	return json.Marshal(m)
}

// UnmarshalJSON reads the MarshalJSON form back. It is lenient the way a
// server must be: numbers may be JSON numbers or strings, a filter given as a
// bare value means eq, and arrays become []string or []float64 when uniform.
func (q *Query) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*q = Query{Filters: map[string]map[string]any{}}
	for k, v := range raw {
		switch k {
		case "order":
			var order [][]any
			if err := json.Unmarshal(v, &order); err != nil {
				return fmt.Errorf("order: want [[field, dir], ...]: %w", err)
			}
			q.Order = make([][2]string, 0, len(order))
			for _, o := range order {
				var p [2]string
				if len(o) == 0 || len(o) > 2 {
					return fmt.Errorf("order: want [field, dir], got %v", o)
				}
				for i, e := range o {
					s, ok := e.(string)
					if !ok {
						return fmt.Errorf("order: want strings, got %v", o)
					}
					p[i] = s
				}
				if p[1] == "" {
					p[1] = "asc"
				}
				q.Order = append(q.Order, p)
			}
		case "type":
			if err := json.Unmarshal(v, &q.Type); err != nil {
				return fmt.Errorf("type: %w", err)
			}
		case "allocated_storage", "limit":
			// A clause on a field of either name survives as an operator
			// map; a number is the query's storage or limit.
			if !bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
				f, err := jsonNumber(v)
				if err != nil {
					return fmt.Errorf("%s: %w", k, err)
				}
				if k == "limit" {
					q.Limit = int(f)
				} else {
					q.AllocatedStorage = f
				}
				continue
			}
			fallthrough
		default:
			ops, err := decodeOps(v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			q.Filters[k] = ops
		}
	}
	return nil
}

func jsonNumber(v json.RawMessage) (float64, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return 0, err
	}
	switch n := x.(type) {
	case float64:
		return n, nil
	case string:
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || !finite(f) {
			return 0, fmt.Errorf("want a number, got %q", n)
		}
		return f, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("want a number, got %s", v)
}

func decodeOps(v json.RawMessage) (map[string]any, error) {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return nil, err
	}
	obj, ok := x.(map[string]any)
	if !ok {
		obj = map[string]any{"eq": x}
	}
	for op, val := range obj {
		if l, ok := val.([]any); ok {
			obj[op] = normalizeList(l)
		}
	}
	return obj, nil
}
