package market

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sampleOffer() Offer {
	return Offer{
		ID: 42, MachineID: 7, HostID: 9, NumGPUs: 2, GPUName: "RTX 4090", GPURAM: 24576, GPUTotalRAM: 49152,
		GPUArch: "nvidia", ComputeCap: 890, CUDAMaxGood: 12.4, DriverVersion: "535.86.05", DriverVers: 535086005,
		CPUCoresEffective: 32, CPUCores: 64, CPURAM: 128000, CPUArch: "amd64", HasAVX: 1, DiskSpace: 100,
		InetUp: 500, InetDown: 900, DPHTotal: 0.8, DPHBase: 0.75, Reliability: 0.98, Reliability2: 0.97,
		Verification: "verified", Rentable: true, External: false, HostingType: 1, Geolocation: "Washington, US",
		OSVersion: "22.04", Duration: 30 * 86400, VastScore: 123, StaticIP: true,
	}
}

func TestCompileMatch(t *testing.T) {
	o := sampleOffer()
	for _, tc := range []struct {
		body string
		want bool
	}{
		{`{"num_gpus":{"eq":"2"}}`, true},
		{`{"num_gpus":{"eq":2}}`, true},
		{`{"num_gpus":{"neq":"2"}}`, false},
		{`{"num_gpus":{"gt":"1"}}`, true},
		{`{"num_gpus":{"gt":"2"}}`, false},
		{`{"num_gpus":{"gte":"2"}}`, true},
		{`{"num_gpus":{"lt":"2"}}`, false},
		{`{"num_gpus":{"lte":"2"}}`, true},
		{`{"num_gpus":{"in":["1","2"]}}`, true},
		{`{"num_gpus":{"notin":["1","2"]}}`, false},
		{`{"num_gpus":{"in":[1,4]}}`, false},
		{`{"dph_total":{"gte":"0.000","lte":"5.000"}}`, true},
		{`{"dph_total":{"lt":"0.5"}}`, false},
		{`{"dph":{"lt":"1"}}`, true},
		{`{"dphtotal":{"lt":"1"}}`, true},
		{`{"gpu_ram":{"gte":24000}}`, true},
		{`{"gpu_ram_GB":{"gte":"24"}}`, true},
		{`{"gpu_ram_GB":{"gte":"25"}}`, false},
		{`{"cpu_ram_GB":{"eq":128}}`, true},
		{`{"gpu_totalram_GB":{"gte":48}}`, true},
		{`{"gpu_totalram":{"gte":48000}}`, true},
		{`{"gpu_name":{"eq":"RTX 4090"}}`, true},
		{`{"gpu_name":{"eq":"RTX 3090"}}`, false},
		{`{"gpu_name":{"in":["RTX 3090","RTX 4090"]}}`, true},
		{`{"gpu_name":{"notin":["RTX 3090","RTX 4090"]}}`, false},
		{`{"geolocation":{"eq":"US"}}`, true},
		{`{"geolocation":{"eq":"Washington, US"}}`, true},
		{`{"geolocation":{"neq":"US"}}`, false},
		{`{"geolocation":{"notin":["HK","CN"]}}`, true},
		{`{"geolocation":{"in":["CA","US"]}}`, true},
		{`{"geolocation":{"notin":["US"]}}`, false},
		{`{"verified":{"eq":true}}`, true},
		{`{"verified":{"eq":"True"}}`, true},
		{`{"verified":{"eq":false}}`, false},
		{`{"datacenter":{"eq":true}}`, true},
		{`{"datacenter":{"eq":"1"}}`, true},
		{`{"rentable":{"eq":true},"external":{"eq":false}}`, true},
		{`{"external":{"eq":"true"}}`, false},
		{`{"static_ip":{"eq":"1"}}`, true},
		{`{"has_avx":{"eq":"1"}}`, true},
		{`{"has_avx":{"eq":true}}`, true},
		{`{"rented":{"eq":true}}`, true}, // the server ignores rented
		{`{"reliability":{"gt":"0.95"}}`, true},
		{`{"reliability2":{"gt":"0.975"}}`, true}, // → reliability 0.98
		{`{"driver_version":{"gte":535086005}}`, true},
		{`{"driver_version":{"gte":"535.86.05"}}`, true},
		{`{"driver_version":{"gt":535086005}}`, false},
		{`{"ubuntu_version":{"eq":"22.04"}}`, true},
		{`{"duration":{"gte":2592000}}`, true},
		{`{"duration":{"gt":2592000}}`, false},
		{`{"allocated_storage":{"eq":"100"}}`, true},
		{`{"allocated_storage":{"eq":"101"}}`, false},
		{`{"cuda_vers":{"gte":"12.1"}}`, true},
		{`{"external":{"eq":null}}`, false},
		{`{"external":{"neq":null}}`, true},
		{`{"cpu_arch":{"eq":"amd64"}}`, true},
		{`{"cpu_cores_effective":{"gt":"16"}}`, true},
		{`{"score":{"gt":"100"}}`, true},
	} {
		var q Query
		if err := json.Unmarshal([]byte(tc.body), &q); err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		f, err := Compile(q)
		if err != nil {
			t.Errorf("Compile(%s): %v", tc.body, err)
			continue
		}
		if got := f.Match(&o); got != tc.want {
			t.Errorf("Match(%s) = %v, want %v", tc.body, got, tc.want)
		}
	}
}

func TestCompileAllocatedStorageKey(t *testing.T) {
	o := sampleOffer()
	for _, tc := range []struct {
		gib  float64
		want bool
	}{{0, true}, {5, true}, {100, true}, {150, false}} {
		f, err := Compile(Query{AllocatedStorage: tc.gib})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Match(&o); got != tc.want {
			t.Errorf("allocated_storage %v: %v, want %v", tc.gib, got, tc.want)
		}
	}
}

func TestCompileParsedQuery(t *testing.T) {
	q, _, err := Parse(mustShowQuery, ParseOptions{NoDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	o := sampleOffer()
	if !f.Match(&o) {
		t.Error("sample offer should match the must-show query")
	}
	for name, mut := range map[string]func(*Offer){
		"HK":           func(o *Offer) { o.Geolocation = "Hong Kong, HK" },
		"CN":           func(o *Offer) { o.Geolocation = "CN" },
		"slow up":      func(o *Offer) { o.InetUp = 199 },
		"16 cores":     func(o *Offer) { o.CPUCoresEffective = 16 },
		"expensive":    func(o *Offer) { o.DPHTotal = 5.01 },
		"not rentable": func(o *Offer) { o.Rentable = false },
		"small disk":   func(o *Offer) { o.DiskSpace = 4 },
	} {
		c := sampleOffer()
		mut(&c)
		if f.Match(&c) {
			t.Errorf("%s: should not match", name)
		}
	}
	// Defaults and the gpu_ram multiplier, end to end.
	q, _, _ = Parse("gpu_ram>=24 num_gpus=2 geolocation!=CN", ParseOptions{})
	if f, err = Compile(q); err != nil || !f.Match(&o) {
		t.Errorf("CLI example should match: %v", err)
	}
	o.Verification = "unverified"
	if f.Match(&o) {
		t.Error("default verified=true should exclude an unverified host")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"foo":{"eq":"1"}}`, `field "foo": unknown column`},
		{`{"num_gpus":{"eq":"two"}}`, `field "num_gpus" op "eq": want a number, got "two"`},
		{`{"num_gpus":{"approx":"2"}}`, `unknown operator`},
		{`{"verified":{"eq":"maybe"}}`, `want a number`},
		{`{"num_gpus":{"eq":["1"]}}`, `a list needs in or notin`},
		{`{"gpu_name":{"eq":{"a":1}}}`, `want a string`},
	} {
		var q Query
		if err := json.Unmarshal([]byte(tc.body), &q); err != nil {
			t.Fatal(err)
		}
		_, err := Compile(q)
		var ce *CompileError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Compile(%s) = %v, want *CompileError containing %q", tc.body, err, tc.want)
		}
	}
}

func TestFieldValueCoversEveryOfferField(t *testing.T) {
	o := sampleOffer()
	rv := reflect.ValueOf(o)
	rt := rv.Type()
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		got, ok := FieldValue(&o, name)
		if !ok {
			t.Errorf("FieldValue(%q) missing", name)
			continue
		}
		var want any
		switch fv := rv.Field(i); fv.Kind() {
		case reflect.String:
			want = fv.String()
		case reflect.Bool:
			want = fv.Bool()
		case reflect.Int, reflect.Int64:
			want = float64(fv.Int())
		case reflect.Float64:
			want = fv.Float()
		}
		if got != want {
			t.Errorf("FieldValue(%q) = %v (%T), want %v", name, got, got, want)
		}
	}
	for name, want := range map[string]any{"country": "US", "datacenter": true, "verified": true, "score": 123.0, "dph": 0.8} {
		if got, ok := FieldValue(&o, name); !ok || got != want {
			t.Errorf("FieldValue(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	if _, ok := FieldValue(&o, "nope"); ok {
		t.Error("FieldValue(nope) ok")
	}
}

func TestSortAndSelect(t *testing.T) {
	mk := func(id int64, dph float64, gpus int, name string) Offer {
		o := sampleOffer()
		o.ID, o.DPHTotal, o.NumGPUs, o.GPUName = id, dph, gpus, name
		return o
	}
	offers := []Offer{mk(1, 0.5, 1, "B"), mk(2, 0.3, 2, "A"), mk(3, 0.5, 2, "C"), mk(4, 0.1, 1, "A"), mk(5, 0.3, 1, "B")}
	ids := func(os []Offer) []int64 {
		var r []int64
		for _, o := range os {
			r = append(r, o.ID)
		}
		return r
	}
	s := append([]Offer(nil), offers...)
	SortOffers(s, [][2]string{{"dph_total", "asc"}, {"id", "desc"}})
	if d := cmp.Diff([]int64{4, 5, 2, 3, 1}, ids(s)); d != "" {
		t.Errorf("dph asc, id desc: %s", d)
	}
	s = append([]Offer(nil), offers...)
	SortOffers(s, [][2]string{{"bogus", "asc"}, {"gpu_name", "asc"}}) // stable, unknown key ignored
	if d := cmp.Diff([]int64{2, 4, 1, 5, 3}, ids(s)); d != "" {
		t.Errorf("gpu_name asc: %s", d)
	}
	s = append([]Offer(nil), offers...)
	SortOffers(s, [][2]string{{"num_gpus", "desc"}, {"dph", "asc"}})
	if d := cmp.Diff([]int64{2, 3, 4, 5, 1}, ids(s)); d != "" {
		t.Errorf("num_gpus desc, dph: %s", d)
	}

	q, _, err := Parse("num_gpus=1", ParseOptions{Order: "dph_total", Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Select(offers, q, 10)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]int64{4, 5}, ids(got)); d != "" {
		t.Errorf("Select limit 2: %s", d)
	}
	q.Limit = 0
	if got, _ = Select(offers, q, 1); len(got) != 1 || got[0].ID != 4 {
		t.Errorf("Select maxResults 1: %v", ids(got))
	}
	if got, _ = Select(offers, q, 0); len(got) != 3 {
		t.Errorf("Select uncapped: %v", ids(got))
	}
	if _, err := Select(offers, Query{Filters: map[string]map[string]any{"nope": {"eq": 1.0}}}, 5); err == nil {
		t.Error("Select with unknown field: no error")
	}
	if offers[0].ID != 1 {
		t.Error("Select reordered its input")
	}
}

func TestFilterRemoved(t *testing.T) {
	q, _, _ := Parse("num_gpus>=2 inet_up>=400", ParseOptions{NoDefault: true})
	f, err := Compile(q)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := sampleOffer(), sampleOffer(), sampleOffer()
	b.NumGPUs = 1
	c.InetUp, c.DiskSpace = 10, 1
	got := f.Removed([]Offer{a, b, c})
	want := []TermCount{{`inet_up gte "400"`, 1}, {`num_gpus gte "2"`, 1}, {"allocated_storage: disk_space gte 5", 0}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
