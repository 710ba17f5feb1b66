package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Routes of the official CLI beyond create and manage (vast.py):
//   - PUT /api/v0/instances/recycle/{id}/ (recycle instance): the container
//     is destroyed and made again from a freshly pulled image, on the same
//     machine, keeping the GPU;
//   - PUT /api/v0/instances/update_template/{id}/ (update instance): a new
//     image, env, onstart or args, then a recycle; answers
//     {success, updated_instance};
//   - PUT /api/v0/launch_instance/ (launch instance): a search body (q)
//     and a create body in one; the best offer the search finds is rented;
//   - GET /api/v0/template/ (search templates): {templates: [...]},
//     filtered by select_filters.
//
// Simplification: a recycle's second pull is not billed as bandwidth.

// recycle boots the instance again from a fresh pull of its image.
func (m *Market) recycle(in *instance, now time.Time) error {
	switch in.Status {
	case "stopped", "exited", "offline", "":
		return &apiError{400, "invalid_args", fmt.Sprintf("Instance %d is %s: only a loaded instance can be recycled.", in.ID, statusWord(in.Status))}
	}
	o := &m.offers[m.byID[in.OfferID]]
	in.ImageGB = m.imageGB(in.Image)
	in.Starts++
	boot := pullSeconds(in.ImageGB, o.InetDown) + extractSeconds(in.ImageGB, o.DiskBW) +
		10 + 50*draw(m.st.Seed, drawSetup, in.fate(), in.Starts)
	in.Status = "loading"
	in.StatusMsg = "Pulling image " + in.Image
	in.ReadyAt = now.Add(time.Duration(boot * float64(time.Second)))
	if in.Fault == "stuck" {
		in.ReadyAt = time.Time{}
	}
	in.log(now, "recycled: pulling %s (%.1f GB) again", in.Image, in.ImageGB)
	return nil
}

func statusWord(s string) string {
	if s == "" {
		return "not yet loading"
	}
	return s
}

func (m *Market) hRecycle(r *http.Request, _ []byte, now time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	if err := m.recycle(in, now); err != nil {
		e := err.(*apiError)
		return jsonReply(200, map[string]any{"success": false, "error": e.Code, "msg": e.Msg})
	}
	return jsonReply(200, map[string]any{"success": true, "msg": fmt.Sprintf("Recycling instance %d.", id)})
}

func (m *Market) hUpdateInstance(r *http.Request, body []byte, now time.Time) reply {
	id, _ := pathID(r)
	in := m.find(id)
	if in == nil {
		return errReply(noInstance(id))
	}
	var req struct {
		Image          *string         `json:"image"`
		Env            json.RawMessage `json:"env"`
		Onstart        *string         `json:"onstart"`
		Args           json.RawMessage `json:"args"`
		TemplateHashID *string         `json:"template_hash_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	if req.TemplateHashID != nil {
		t, ok := templateByHash(*req.TemplateHashID)
		if !ok {
			return errReply(&apiError{404, "no_such_template", fmt.Sprintf("Template %s does not exist.", *req.TemplateHashID)})
		}
		in.Image = t.image()
	}
	if req.Image != nil && *req.Image != "" {
		in.Image = *req.Image
	}
	if req.Onstart != nil {
		in.Onstart = *req.Onstart
	}
	if len(req.Env) > 0 {
		env, err := parseEnv(req.Env)
		if err != nil {
			return badArgs("env: %v", err)
		}
		in.Env = env
	}
	if err := m.recycle(in, now); err != nil {
		e := err.(*apiError)
		return jsonReply(200, map[string]any{"success": false, "error": e.Code, "msg": e.Msg})
	}
	return jsonReply(200, map[string]any{"success": true, "updated_instance": m.row(in, now)})
}

// template is one entry of the simulator's template catalogue.
type template struct {
	ID                   int64   `json:"id"`
	HashID               string  `json:"hash_id"`
	Name                 string  `json:"name"`
	Image                string  `json:"image"`
	Tag                  string  `json:"tag"`
	DefaultTag           string  `json:"default_tag"`
	CreatorID            int64   `json:"creator_id"`
	CreatedAt            float64 `json:"created_at"`
	CountCreated         int64   `json:"count_created"`
	Private              bool    `json:"private"`
	Recommended          bool    `json:"recommended"`
	RecommendedDiskSpace float64 `json:"recommended_disk_space"`
	SSHDirect            bool    `json:"ssh_direct"`
	UseSSH               bool    `json:"use_ssh"`
	JupDirect            bool    `json:"jup_direct"`
	Onstart              string  `json:"onstart"`
	Runtype              string  `json:"runtype"`
}

func (t template) image() string { return t.Image + ":" + t.Tag }

// templates is a small public catalogue, as vast's recommended list has.
var templates = []template{
	{ID: 101, HashID: "4e17788f74f075dd9aab7d0d4427968f", Name: "PyTorch (CUDA)", Image: "pytorch/pytorch", Tag: "latest", DefaultTag: "latest",
		CreatorID: 1, CreatedAt: 1.7e9, CountCreated: 52110, Recommended: true, RecommendedDiskSpace: 32, SSHDirect: true, UseSSH: true, Runtype: "ssh"},
	{ID: 102, HashID: "cc68218cbd560ef0b6a2c3ef5b2ac59f", Name: "Ubuntu 22.04 VM-like", Image: "ubuntu", Tag: "22.04", DefaultTag: "22.04",
		CreatorID: 1, CreatedAt: 1.7e9, CountCreated: 20400, Recommended: true, RecommendedDiskSpace: 10, SSHDirect: true, UseSSH: true, Runtype: "ssh"},
	{ID: 103, HashID: "9c6d5e0a8b1f4c2e7d3a6b5c4e1f2a3b", Name: "Jupyter (TensorFlow)", Image: "tensorflow/tensorflow", Tag: "latest-gpu-jupyter", DefaultTag: "latest-gpu-jupyter",
		CreatorID: 1, CreatedAt: 1.7e9, CountCreated: 8800, Recommended: false, RecommendedDiskSpace: 20, JupDirect: true, UseSSH: false, Runtype: "jupyter"},
}

func templateByHash(h string) (template, bool) {
	for _, t := range templates {
		if t.HashID == h {
			return t, true
		}
	}
	return template{}, false
}

// hTemplates answers search templates: the catalogue filtered by
// select_filters ({column: {op: value}}), compared as the offer search
// compares.
func (m *Market) hTemplates(r *http.Request, _ []byte, _ time.Time) reply {
	var filters map[string]map[string]any
	if s := r.URL.Query().Get("select_filters"); s != "" {
		if err := json.Unmarshal([]byte(s), &filters); err != nil {
			return badArgs("select_filters must be a JSON object of {column: {op: value}}")
		}
	}
	out := []map[string]any{}
	for _, t := range templates {
		b, _ := json.Marshal(t)
		var row map[string]any
		json.Unmarshal(b, &row)
		keep := true
		for col, ops := range filters {
			have, ok := row[col]
			if !ok {
				return badArgs("%s is not a template column", col)
			}
			for op, want := range ops {
				hit, err := templateMatch(have, op, want)
				if err != nil {
					return badArgs("%s: %v", col, err)
				}
				keep = keep && hit
			}
		}
		if keep {
			out = append(out, row)
		}
	}
	return jsonReply(200, map[string]any{"success": true, "templates": out})
}

// templateMatch compares one template value with a filter's.
func templateMatch(have any, op string, want any) (bool, error) {
	if !operators[op] {
		return false, fmt.Errorf("unknown operator %q", op)
	}
	list, isList := want.([]any)
	if !isList {
		list = []any{want}
	}
	compare := func(w any) (int, bool) {
		switch h := have.(type) {
		case string:
			s, ok := w.(string)
			if !ok {
				s = fmt.Sprint(w)
			}
			return order(h, s), true
		case bool:
			f, ok := asNumber(w, true)
			return order(b01(h), f), ok
		case float64:
			f, ok := asNumber(w, false)
			return order(h, f), ok
		}
		return 0, false
	}
	if op == "in" || op == "notin" {
		hit := false
		for _, w := range list {
			if c, ok := compare(w); ok && c == 0 {
				hit = true
			}
		}
		return hit == (op == "in"), nil
	}
	c, ok := compare(list[0])
	return ok && holds(op, c), nil
}

// order is -1, 0 or 1 as a is below, neither below nor above (NaN
// included), or above b.
func order[T cmp.Ordered](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hLaunch is launch instance: search with q, rent the first offer.
func (m *Market) hLaunch(r *http.Request, body []byte, now time.Time) reply {
	var req struct {
		Q              json.RawMessage `json:"q"`
		Image          string          `json:"image"`
		Disk           *float64        `json:"disk"`
		Env            json.RawMessage `json:"env"`
		Onstart        *string         `json:"onstart"`
		Runtype        *string         `json:"runtype"`
		Label          *string         `json:"label"`
		TemplateHashID *string         `json:"template_hash_id"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badArgs("invalid body: %v", err)
	}
	in := createInput{Image: req.Image, Disk: 8, Label: req.Label, Runtype: "ssh"}
	if req.TemplateHashID != nil && *req.TemplateHashID != "" {
		t, ok := templateByHash(*req.TemplateHashID)
		if !ok {
			return errReply(&apiError{404, "no_such_template", fmt.Sprintf("Template %s does not exist.", *req.TemplateHashID)})
		}
		if in.Image == "" {
			in.Image = t.image()
		}
		in.Runtype, in.Onstart = t.Runtype, t.Onstart
	}
	if in.Image == "" {
		return badArgs("image is required")
	}
	if err := in.override(req.Disk, req.Onstart, req.Runtype, req.Env); err != nil {
		return badArgs("env: %v", err)
	}
	q, err := parseRequest(req.Q)
	if err != nil {
		return badArgs("q: %v", err)
	}
	for _, o := range m.searchOffers(q, now, MaxResultCap) {
		if !o.Rentable || o.DiskSpace < in.Disk {
			continue
		}
		inst, err := m.create(o.ID, in, now)
		if e, ok := err.(*apiError); ok && e.Code == "insufficient_credit" {
			return errReply(err)
		}
		if err != nil {
			continue // taken meanwhile: the next one
		}
		return jsonReply(200, map[string]any{"success": true, "new_contract": inst.ID, "instance_api_key": inst.APIKey})
	}
	return jsonReply(200, map[string]any{"success": false, "error": "no_offers", "message": "No offer matches the query and is free to rent."})
}
