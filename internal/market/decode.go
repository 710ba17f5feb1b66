package market

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unsafe"
)

// DecodeOffers reads offers as users keep them: the search answer
// ({"offers": [...]}), a bare JSON array (`vastai search offers --raw`, or a
// `search --save`d ranking), or JSON lines, one offer per line. It decodes
// straight into Offer with a scanner of its own: the standard library's
// reflection-driven decoder spends most of a ranking's time here (a 100,000-
// offer dump is over 100 MB of JSON). Unknown fields are skipped; repeated
// strings (GPU and CPU names, places) are shared.
func DecodeOffers(data []byte) ([]Offer, error) {
	var c collector
	if err := ScanOffers(data, c.add); err != nil {
		return nil, err
	}
	return c.offers(), nil
}

// DecodeSearchAnswer reads the search answer, {"offers": [...], ...}; ok
// is false when the answer is an object without an offers list (an error
// answer, say).
func DecodeSearchAnswer(data []byte) (offers []Offer, ok bool, err error) {
	offers, ok, _, err = DecodeSearchAnswerNotes(data)
	return offers, ok, err
}

// DecodeSearchAnswerNotes is DecodeSearchAnswer that also says which
// offers it read leniently: a field of another type than the API's (a
// marketplace's types drift: os_version as a number, dph_total as a
// string) is read from its text when that works and is otherwise left
// unknown (its zero value); an offer whose id or price cannot be read is
// dropped. Only malformed JSON is an error: one odd offer never fails the
// search.
func DecodeSearchAnswerNotes(data []byte) (offers []Offer, ok bool, notes DecodeNotes, err error) {
	var c collector
	d := &offerDecoder{b: data, intern: map[string]string{}, fn: func(o *Offer, _ []byte) error { return c.add(o) }}
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != '{' {
		return nil, false, notes, d.errorf("want the search answer, an object")
	}
	if ok, err = d.object(true); err != nil {
		return nil, false, d.notes, err
	}
	if d.ws(); d.i != len(d.b) {
		return nil, false, d.notes, d.errorf("unexpected data after the answer")
	}
	return c.offers(), ok, d.notes, nil
}

// DecodeNotes counts what a lenient decode could not read as the API
// types it.
type DecodeNotes struct {
	Odd     int            // offers kept with a field read from another type or left unknown
	Dropped int            // offers dropped: their id or price could not be read
	Fields  map[string]int // offers per odd field name
}

// String names the odd fields, most frequent first, for a warning.
func (n DecodeNotes) String() string {
	if n.Odd == 0 && n.Dropped == 0 {
		return ""
	}
	names := make([]string, 0, len(n.Fields))
	for k := range n.Fields {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c := cmp.Compare(n.Fields[b], n.Fields[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s ×%d", k, n.Fields[k])
	}
	return fmt.Sprintf("%d offer(s) read leniently, %d dropped (id or price unreadable); odd fields: %s",
		n.Odd, n.Dropped, strings.Join(parts, ", "))
}

// critical fields: an offer without them readable is dropped, not kept
// with a zero that would rank it first or rent the wrong thing.
func critical(key string) bool { return key == "id" || key == "dph_total" }

// collector keeps decoded offers. Offers are ~700-byte structs: it grows in
// chunks and copies once, rather than let append move the whole slice
// again and again.
type collector struct {
	chunks [][]Offer
	cur    []Offer
	n      int
}

func (c *collector) add(o *Offer) error {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.chunks = append(c.chunks, c.cur)
		}
		c.cur = make([]Offer, 0, max(1024, 2*cap(c.cur)))
	}
	c.cur = append(c.cur, *o)
	c.n++
	return nil
}

func (c *collector) offers() []Offer {
	out := make([]Offer, 0, c.n)
	for _, ch := range c.chunks {
		out = append(out, ch...)
	}
	return append(out, c.cur...)
}

// ScanOffers is DecodeOffers one offer at a time: fn sees each offer in
// turn, in a buffer it must copy from to keep (so a caller that keeps only
// the offers a query matches never holds the others).
func ScanOffers(data []byte, fn func(o *Offer) error) error {
	return scanOffers(data, func(o *Offer, _ []byte) error { return fn(o) })
}

// scanOffers also gives fn each offer's own JSON text.
func scanOffers(data []byte, fn func(o *Offer, raw []byte) error) error {
	d := &offerDecoder{b: data, intern: map[string]string{}, fn: fn}
	for {
		d.ws()
		if d.i >= len(d.b) {
			return nil
		}
		switch d.b[d.i] {
		case '[':
			if err := d.array(); err != nil {
				return err
			}
		case '{':
			if err := d.top(); err != nil {
				return err
			}
		default:
			return d.errorf("want an offer object or an array of offers")
		}
	}
}

type offerDecoder struct {
	b      []byte
	i      int
	intern map[string]string
	fn     func(o *Offer, raw []byte) error
	o      Offer // the offer being decoded

	// odd and drop describe the offer being decoded: a field read
	// leniently, and an id or price that could not be read at all.
	odd   bool
	drop  bool
	notes DecodeNotes
}

// emit hands the decoded offer to fn unless it must be dropped.
func (d *offerDecoder) emit(raw []byte) error {
	odd, drop := d.odd, d.drop
	d.odd, d.drop = false, false
	switch {
	case drop:
		d.notes.Dropped++
		return nil
	case odd:
		d.notes.Odd++
	}
	return d.fn(&d.o, raw)
}

// noteOdd records a field read leniently (or not at all) in this offer.
func (d *offerDecoder) noteOdd(key []byte, unread bool) {
	if d.notes.Fields == nil {
		d.notes.Fields = map[string]int{}
	}
	d.notes.Fields[string(key)]++
	d.odd = true
	if unread && critical(string(key)) {
		d.drop = true
	}
}

func (d *offerDecoder) errorf(format string, args ...any) error {
	line := 1 + bytes.Count(d.b[:min(d.i, len(d.b))], []byte{'\n'})
	return fmt.Errorf("offers JSON, line %d (byte %d): %s", line, d.i, fmt.Sprintf(format, args...))
}

func (d *offerDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// expect consumes c after optional white space.
func (d *offerDecoder) expect(c byte) error {
	d.ws()
	if d.i >= len(d.b) || d.b[d.i] != c {
		return d.errorf("want %q", c)
	}
	d.i++
	return nil
}

// array decodes [offer, offer, ...], handing each to fn.
func (d *offerDecoder) array() error {
	if err := d.expect('['); err != nil {
		return err
	}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == ']' {
		d.i++
		return nil
	}
	for {
		d.ws()
		d.o = Offer{}
		start := d.i
		d.odd, d.drop = false, false
		if _, err := d.object(false); err != nil {
			return err
		}
		if err := d.emit(d.b[start:d.i]); err != nil {
			return err
		}
		d.ws()
		if d.i >= len(d.b) {
			return d.errorf("unterminated array")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case ']':
			d.i++
			return nil
		default:
			return d.errorf("want , or ] in the offer array")
		}
	}
}

// top decodes a top-level object: the search answer, whose "offers" array
// is the list, or one offer of a JSON-lines file.
func (d *offerDecoder) top() error {
	d.o = Offer{}
	d.odd, d.drop = false, false
	start := d.i
	wrapped, err := d.object(true)
	if err != nil || wrapped {
		return err
	}
	return d.emit(d.b[start:d.i])
}

// object decodes one offer into d.o. At the top level, an "offers" array
// inside is the search answer's list: its offers go to fn and wrapped is
// true.
func (d *offerDecoder) object(topLevel bool) (wrapped bool, err error) {
	if err := d.expect('{'); err != nil {
		return false, err
	}
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == '}' {
		d.i++
		return false, nil
	}
	for {
		d.ws()
		key, err := d.rawString()
		if err != nil {
			return false, err
		}
		if err := d.expect(':'); err != nil {
			return false, err
		}
		d.ws()
		if topLevel && string(key) == "offers" && d.i < len(d.b) && d.b[d.i] == '[' {
			if err := d.array(); err != nil {
				return false, err
			}
			wrapped = true
		} else if err := d.field(&d.o, key); err != nil {
			return false, err
		}
		d.ws()
		if d.i >= len(d.b) {
			return false, d.errorf("unterminated object")
		}
		switch d.b[d.i] {
		case ',':
			d.i++
		case '}':
			d.i++
			return wrapped, nil
		default:
			return false, d.errorf("want , or } after %q", key)
		}
	}
}

func (d *offerDecoder) null() bool {
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// field decodes the value of key into o (the names are the API's). A
// value of another JSON type than the field's is read leniently.
func (d *offerDecoder) field(o *Offer, key []byte) error {
	start := d.i
	err := d.typed(o, key)
	if err == nil {
		return nil
	}
	d.i = start
	return d.lenient(o, key, err)
}

// lenient reads a value typed otherwise than the API says: a string's
// text as a number or boolean ("0.45", "true"), a number or boolean as a
// string's text (os_version 22.04); failing that the field stays unknown.
// A value that is not JSON at all is still an error.
func (d *offerDecoder) lenient(o *Offer, key []byte, typeErr error) error {
	start := d.i
	if err := d.skip(); err != nil {
		return fmt.Errorf("%q: %w", key, typeErr)
	}
	raw := d.b[start:d.i]
	var alt []byte
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if t := strings.TrimSpace(s); t != "" && t[0] != '"' && t[0] != '{' && t[0] != '[' {
				alt = []byte(strings.ToLower(t))
			}
		}
	case '{', '[':
	default: // a number or true/false
		alt = append(append([]byte{'"'}, raw...), '"')
	}
	if alt != nil {
		sub := &offerDecoder{b: alt, intern: d.intern}
		if sub.typed(o, key) == nil && sub.i == len(alt) {
			d.noteOdd(key, false)
			return nil
		}
	}
	d.noteOdd(key, true)
	return nil
}

// typed decodes the value of key as the API types it.
func (d *offerDecoder) typed(o *Offer, key []byte) error {
	if d.null() {
		return nil
	}
	var err error
	switch string(key) {
	case "id":
		var v float64
		v, err = d.float()
		o.ID = int64(v)
	case "ask_contract_id":
		var v float64
		v, err = d.float()
		o.AskContractID = int64(v)
	case "bundle_id":
		var v float64
		v, err = d.float()
		o.BundleID = int64(v)
	case "machine_id":
		var v float64
		v, err = d.float()
		o.MachineID = int64(v)
	case "host_id":
		var v float64
		v, err = d.float()
		o.HostID = int64(v)
	case "num_gpus":
		var v float64
		v, err = d.float()
		o.NumGPUs = int(v)
	case "gpu_name":
		o.GPUName, err = d.str()
	case "gpu_ram":
		o.GPURAM, err = d.float()
	case "gpu_total_ram":
		o.GPUTotalRAM, err = d.float()
	case "gpu_frac":
		o.GPUFrac, err = d.float()
	case "gpu_arch":
		o.GPUArch, err = d.str()
	case "gpu_mem_bw":
		o.GPUMemBW, err = d.float()
	case "gpu_max_power":
		o.GPUMaxPower, err = d.float()
	case "gpu_max_temp":
		o.GPUMaxTemp, err = d.float()
	case "gpu_display_active":
		o.GPUDisplayActive, err = d.boolean()
	case "gpu_lanes":
		var v float64
		v, err = d.float()
		o.GPULanes = int(v)
	case "compute_cap":
		var v float64
		v, err = d.float()
		o.ComputeCap = int(v)
	case "cuda_max_good":
		o.CUDAMaxGood, err = d.float()
	case "driver_version":
		o.DriverVersion, err = d.str()
	case "driver_vers":
		var v float64
		v, err = d.float()
		o.DriverVers = int64(v)
	case "total_flops":
		o.TotalFlops, err = d.float()
	case "dlperf":
		o.DLPerf, err = d.float()
	case "cpu_name":
		o.CPUName, err = d.str()
	case "cpu_arch":
		o.CPUArch, err = d.str()
	case "cpu_cores":
		var v float64
		v, err = d.float()
		o.CPUCores = int(v)
	case "cpu_cores_effective":
		o.CPUCoresEffective, err = d.float()
	case "cpu_ghz":
		o.CPUGHz, err = d.float()
	case "cpu_ram":
		o.CPURAM, err = d.float()
	case "has_avx":
		var v float64
		v, err = d.float()
		o.HasAVX = int(v)
	case "mobo_name":
		o.MoboName, err = d.str()
	case "pci_gen":
		o.PCIGen, err = d.float()
	case "pcie_bw":
		o.PCIeBW, err = d.float()
	case "disk_space":
		o.DiskSpace, err = d.float()
	case "disk_bw":
		o.DiskBW, err = d.float()
	case "disk_name":
		o.DiskName, err = d.str()
	case "inet_up":
		o.InetUp, err = d.float()
	case "inet_down":
		o.InetDown, err = d.float()
	case "inet_up_cost":
		o.InetUpCost, err = d.float()
	case "inet_down_cost":
		o.InetDownCost, err = d.float()
	case "direct_port_count":
		var v float64
		v, err = d.float()
		o.DirectPortCount = int(v)
	case "public_ipaddr":
		o.PublicIPAddr, err = d.str()
	case "static_ip":
		o.StaticIP, err = d.boolean()
	case "os_version":
		o.OSVersion, err = d.str()
	case "dph_base":
		o.DPHBase, err = d.float()
	case "dph_total":
		o.DPHTotal, err = d.float()
	case "min_bid":
		o.MinBid, err = d.float()
	case "storage_cost":
		o.StorageCost, err = d.float()
	case "storage_total_cost":
		o.StorageTotalCost, err = d.float()
	case "dlperf_per_dphtotal":
		o.DLPerfPerDPH, err = d.float()
	case "flops_per_dphtotal":
		o.FlopsPerDPH, err = d.float()
	case "score":
		o.VastScore, err = d.float()
	case "reliability":
		o.Reliability, err = d.float()
	case "reliability2":
		o.Reliability2, err = d.float()
	case "verification":
		o.Verification, err = d.str()
	case "rentable":
		o.Rentable, err = d.boolean()
	case "rented":
		o.Rented, err = d.boolean()
	case "is_bid":
		o.IsBid, err = d.boolean()
	case "external":
		o.External, err = d.boolean()
	case "vms_enabled":
		o.VMsEnabled, err = d.boolean()
	case "hosting_type":
		var v float64
		v, err = d.float()
		o.HostingType = int(v)
	case "geolocation":
		o.Geolocation, err = d.str()
	case "cluster_id":
		var v float64
		v, err = d.float()
		o.ClusterID = int64(v)
	case "start_date":
		o.StartDate, err = d.float()
	case "end_date":
		o.EndDate, err = d.float()
	case "duration":
		o.Duration, err = d.float()
	default:
		err = d.skip()
	}
	return err
}

// rawString returns a string's bytes without the quotes; escapes are left
// as they are (keys never need them).
func (d *offerDecoder) rawString() ([]byte, error) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, d.errorf("want a string")
	}
	start := d.i + 1
	for j := start; j < len(d.b); j++ {
		switch d.b[j] {
		case '\\':
			j++
		case '"':
			d.i = j + 1
			return d.b[start:j], nil
		}
	}
	return nil, d.errorf("unterminated string")
}

func (d *offerDecoder) str() (string, error) {
	at := d.i
	raw, err := d.rawString()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(raw, '\\') >= 0 {
		var s string
		if err := json.Unmarshal(d.b[at:d.i], &s); err != nil {
			return "", d.errorf("bad string: %v", err)
		}
		return s, nil
	}
	if s, ok := d.intern[string(raw)]; ok {
		return s, nil
	}
	s := string(raw)
	if len(d.intern) < 1<<16 {
		d.intern[s] = s
	}
	return s, nil
}

func (d *offerDecoder) boolean() (bool, error) {
	switch {
	case bytes.HasPrefix(d.b[d.i:], []byte("true")):
		d.i += 4
		return true, nil
	case bytes.HasPrefix(d.b[d.i:], []byte("false")):
		d.i += 5
		return false, nil
	}
	// Some fields arrive as 0/1.
	v, err := d.float()
	return v != 0, err
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float reads a JSON number. Numbers with at most 15 significant digits and
// a small exponent (nearly all of an offer's) are converted exactly with one
// multiplication or division (Clinger's fast path); the rest go through
// strconv.
func (d *offerDecoder) float() (float64, error) {
	start := d.i
	j := d.i
	neg := false
	if j < len(d.b) && d.b[j] == '-' {
		neg = true
		j++
	}
	var mant uint64
	digits, exp := 0, 0
	sawDigit := false
	for ; j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9'; j++ {
		sawDigit = true
		if mant == 0 && d.b[j] == '0' {
			continue
		}
		if digits < 19 {
			mant = mant*10 + uint64(d.b[j]-'0')
		} else {
			exp++
		}
		digits++
	}
	if j < len(d.b) && d.b[j] == '.' {
		j++
		for ; j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9'; j++ {
			sawDigit = true
			if mant == 0 && d.b[j] == '0' {
				exp--
				continue
			}
			if digits < 19 {
				mant = mant*10 + uint64(d.b[j]-'0')
				exp--
			}
			digits++
		}
	}
	if !sawDigit {
		return 0, d.errorf("want a number")
	}
	slow := digits > 15 || mant >= 1<<53
	if j < len(d.b) && (d.b[j] == 'e' || d.b[j] == 'E') {
		slow = true
		j++
		for j < len(d.b) && (d.b[j] == '+' || d.b[j] == '-' || (d.b[j] >= '0' && d.b[j] <= '9')) {
			j++
		}
	}
	d.i = j
	if !slow && exp >= -22 && exp <= 22 {
		f := float64(mant)
		if exp < 0 {
			f /= pow10[-exp]
		} else {
			f *= pow10[exp]
		}
		if neg {
			f = -f
		}
		return f, nil
	}
	raw := d.b[start:j]
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(raw), len(raw)), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0, d.errorf("bad number %q", raw)
	}
	return f, nil
}

// skip passes over any JSON value.
func (d *offerDecoder) skip() error {
	d.ws()
	if d.i >= len(d.b) {
		return d.errorf("want a value")
	}
	switch c := d.b[d.i]; {
	case c == '"':
		_, err := d.rawString()
		return err
	case c == '{' || c == '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if _, err := d.rawString(); err != nil {
					return err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					d.i++
					return nil
				}
			}
			d.i++
		}
		return d.errorf("unterminated value")
	case c == 't' || c == 'f':
		_, err := d.boolean()
		return err
	case c == 'n':
		if d.null() {
			return nil
		}
	default:
		_, err := d.float()
		return err
	}
	return d.errorf("want a value")
}
