package sim

import (
	"encoding/json"
	"strconv"
)

// Odd rows (Faults.OddRows). vast's API does not hold its rows to one
// shape: the official CLI's own show-instance example gives ports as a
// list of numbers, columns drift in type between releases (os_version as a
// number, prices as strings), new columns appear, and fields come back
// null. A share of rows, drawn per row id so every answer agrees, is sent
// in one of these shapes. The row's facts stay true; only their shape
// changes, so a client that reads it leniently loses nothing.

// offerOddities reshape one offer row (a JSON object).
var offerOddities = []func(map[string]any){
	func(o map[string]any) { // a price as a string
		o["dph_total"] = jsonString(o["dph_total"])
	},
	func(o map[string]any) { // a version as a number
		if f, err := strconv.ParseFloat(asString(o["os_version"]), 64); err == nil {
			o["os_version"] = f
		} else {
			o["os_version"] = 22.04
		}
	},
	func(o map[string]any) { // a column this client has never seen
		o["hosting_type_v2"] = map[string]any{"kind": "datacenter", "tier": 2}
	},
	func(o map[string]any) { // a text field null
		o["geolocation"] = nil
	},
	func(o map[string]any) { // a number as a string
		o["cpu_cores_effective"] = jsonString(o["cpu_cores_effective"])
	},
}

// instanceOddities reshape one instance row.
var instanceOddities = []func(map[string]any){
	func(r map[string]any) { // ports as a list of numbers, as in vast's show-instance example
		ports, _ := r["ports"].(map[string]any)
		var list []any
		for k := range ports {
			if n, err := strconv.Atoi(trimProto(k)); err == nil {
				list = append(list, n)
			}
		}
		if list == nil {
			list = []any{}
		}
		r["ports"] = list
	},
	func(r map[string]any) { // the message null
		r["status_msg"] = nil
	},
	func(r map[string]any) { // a port as a string
		r["ssh_port"] = jsonString(r["ssh_port"])
	},
	func(r map[string]any) { // no environment at all
		r["extra_env"] = nil
	},
	func(r map[string]any) { // a column this client has never seen
		r["template_hash_id"] = "a1b2c3"
		r["vm_info"] = []any{map[string]any{"hypervisor": "none"}}
	},
}

// oddRow reshapes row when id is drawn odd; it returns the row unchanged
// (as its typed value) otherwise.
func (m *Market) oddRow(row any, id int64, oddities []func(map[string]any)) any {
	share := m.cfg.Faults.OddRows
	if share <= 0 || draw(m.st.Seed, drawOddRow, id, 0) >= share {
		return row
	}
	b, err := json.Marshal(row)
	if err != nil {
		return row
	}
	var obj map[string]any
	if json.Unmarshal(b, &obj) != nil {
		return row
	}
	k := int(draw(m.st.Seed, drawOddRow, id, 1) * float64(len(oddities)))
	oddities[min(k, len(oddities)-1)](obj)
	return obj
}

func jsonString(v any) any {
	if v == nil {
		return nil
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func asString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

func trimProto(k string) string {
	for i := range len(k) {
		if k[i] == '/' {
			return k[:i]
		}
	}
	return k
}
