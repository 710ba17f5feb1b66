// Package plan turns a task description into hardware requirements, search
// tiers and three costed options. It is pure: offers come in as data or
// through the caller's SearchFunc, results go out as data; no network, no
// disk except LoadTaskFile, no clock.
package plan

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
)

// MaxNodes is the largest fleet one launch or one job rents: the size the
// launch, the coordinator and the simulated market are measured at
// (`vastfleet bench scale --nodes 1000`).
const MaxNodes = 1000

// Task is what the user wants to run, from flags or the [task] section of
// vastfleet.toml. Zero values mean "not given"; Requirements fills defaults
// and says which it assumed.
type Task struct {
	// Model is a known model name ("llama2-7b", "resnet50", "7b"); Params
	// (billions) is used when the model is not in the table or to override it.
	Model  string  `toml:"model"`
	Params float64 `toml:"params"`
	// Precision is fp32, fp16, bf16, int8 or int4 (default fp16).
	Precision string `toml:"precision"`
	// Mode is train, finetune or inference (default finetune). A fine-tune
	// of a model with ≥ 1 B parameters is LoRA unless Full is set.
	Mode string `toml:"mode"`
	Full bool   `toml:"full"`
	// Optimizer is adamw (default), adam, adamw8bit, sgd, adafactor or lion.
	Optimizer string `toml:"optimizer"`
	BatchSize int    `toml:"batch_size"`
	SeqLen    int    `toml:"seq_len"`
	// DatasetSize is in samples; Throughput is samples per second on one
	// RTX 3090; Epochs defaults to 1.
	DatasetSize float64 `toml:"dataset_size"`
	DatasetGB   float64 `toml:"dataset_gb"`
	Epochs      float64 `toml:"epochs"`
	Throughput  float64 `toml:"throughput"`
	// Hours is a hint: the job's length on one RTX 3090.
	Hours float64 `toml:"hours"`
	// Distributed is "", none, ddp, fsdp or deepspeed.
	Distributed string `toml:"distributed"`
	// GPUs asks for at least this many GPUs.
	GPUs        int     `toml:"gpus"`
	Image       string  `toml:"image"`
	ImageGB     float64 `toml:"image_gb"`
	DiskGB      float64 `toml:"disk_gb"`
	Framework   string  `toml:"framework"` // pytorch (default), pytorch1, tensorflow, jax
	CUDA        float64 `toml:"cuda"`
	MaxBudget   float64 `toml:"max_budget"` // dollars for the whole run
	AutoDestroy bool    `toml:"auto_destroy"`
}

// LoadTaskFile reads the [task] section of a vastfleet.toml file. Other
// sections are skipped unread.
func LoadTaskFile(path string) (Task, error) {
	f, err := os.Open(path)
	if err != nil {
		return Task{}, err
	}
	defer f.Close()
	return ParseTask(f, path)
}

// ParseTask reads the [task] section of TOML text. It understands the flat
// subset vastfleet needs: `key = "string" | 'literal' | number | true/false`
// with # comments. Errors are "name:line: key "k": why".
func ParseTask(r io.Reader, name string) (Task, error) {
	var t Task
	fields := taskFields()
	seen := map[string]int{}
	inTask, found := false, false
	sc := bufio.NewScanner(r)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			head, _, _ := strings.Cut(line, "#")
			head = strings.TrimSpace(head)
			if !strings.HasSuffix(head, "]") {
				return Task{}, fmt.Errorf("%s:%d: bad section header %q", name, ln, line)
			}
			inTask = strings.TrimSpace(strings.Trim(head, "[]")) == "task"
			if inTask {
				if found {
					return Task{}, fmt.Errorf("%s:%d: second [task] section", name, ln)
				}
				found = true
			}
			continue
		}
		if !inTask {
			continue
		}
		key, raw, ok := strings.Cut(line, "=")
		if !ok {
			return Task{}, fmt.Errorf("%s:%d: want key = value, got %q", name, ln, line)
		}
		key = strings.TrimSpace(key)
		if strings.HasPrefix(key, `"`) && strings.HasSuffix(key, `"`) && len(key) >= 2 {
			key = key[1 : len(key)-1]
		}
		fail := func(format string, a ...any) error {
			return fmt.Errorf("%s:%d: key %q: %s", name, ln, key, fmt.Sprintf(format, a...))
		}
		fi, ok := fields[key]
		if !ok {
			return Task{}, fmt.Errorf("%s:%d: unknown key %q in [task]", name, ln, key)
		}
		if prev, dup := seen[key]; dup {
			return Task{}, fail("already set on line %d", prev)
		}
		seen[key] = ln
		val, err := parseValue(strings.TrimSpace(raw))
		if err != nil {
			return Task{}, fail("%v", err)
		}
		if err := setField(reflect.ValueOf(&t).Elem().Field(fi), key, val); err != nil {
			return Task{}, fail("%v", err)
		}
	}
	if err := sc.Err(); err != nil {
		return Task{}, fmt.Errorf("%s: %w", name, err)
	}
	if !found {
		return Task{}, fmt.Errorf("%s: no [task] section", name)
	}
	return t, nil
}

func taskFields() map[string]int {
	m := map[string]int{}
	rt := reflect.TypeOf(Task{})
	for i := range rt.NumField() {
		if tag := rt.Field(i).Tag.Get("toml"); tag != "" {
			m[tag] = i
		}
	}
	return m
}

// parseValue returns a string, float64 or bool, and checks that only a
// comment follows the value.
func parseValue(s string) (any, error) {
	if s == "" {
		return nil, errors.New("missing value")
	}
	var v any
	var rest string
	switch s[0] {
	case '"':
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' {
				b.WriteByte(s[i])
				continue
			}
			i++
			if i >= len(s) {
				break
			}
			switch s[i] {
			case '"', '\\':
				b.WriteByte(s[i])
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				return nil, fmt.Errorf("unsupported escape \\%c", s[i])
			}
		}
		if i >= len(s) {
			return nil, errors.New("unterminated string")
		}
		v, rest = b.String(), s[i+1:]
	case '\'':
		end := strings.IndexByte(s[1:], '\'')
		if end < 0 {
			return nil, errors.New("unterminated string")
		}
		v, rest = s[1:end+1], s[end+2:]
	case '[', '{':
		return nil, errors.New("arrays and tables are not supported in [task]")
	default:
		tok, r, _ := strings.Cut(s, "#")
		tok = strings.TrimSpace(tok)
		rest = "#" + r
		switch tok {
		case "true":
			v = true
		case "false":
			v = false
		default:
			f, err := strconv.ParseFloat(strings.ReplaceAll(tok, "_", ""), 64)
			if err != nil {
				return nil, fmt.Errorf("bad value %q (want a quoted string, a number, true or false)", tok)
			}
			v = f
		}
	}
	rest = strings.TrimSpace(rest)
	if rest != "" && rest[0] != '#' {
		return nil, fmt.Errorf("unexpected %q after value", rest)
	}
	return v, nil
}

func setField(f reflect.Value, key string, v any) error {
	kindName := map[reflect.Kind]string{reflect.String: "a string", reflect.Bool: "true or false", reflect.Float64: "a number", reflect.Int: "a whole number"}
	switch f.Kind() {
	case reflect.String:
		if s, ok := v.(string); ok {
			f.SetString(s)
			return nil
		}
	case reflect.Bool:
		if b, ok := v.(bool); ok {
			f.SetBool(b)
			return nil
		}
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
			f.SetFloat(x)
			return nil
		case string:
			if key == "params" { // "7B", "350M"
				p, err := ParseParams(x)
				if err != nil {
					return err
				}
				f.SetFloat(p)
				return nil
			}
		}
	case reflect.Int:
		if x, ok := v.(float64); ok {
			if x != float64(int64(x)) {
				return fmt.Errorf("want a whole number, got %v", x)
			}
			f.SetInt(int64(x))
			return nil
		}
	}
	return fmt.Errorf("want %s, got %v", kindName[f.Kind()], fmtValue(v))
}

func fmtValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// ParseParams reads a parameter count into billions: "7b", "7B", "350M",
// "1.3e9", "125000000". A bare number below 10,000 is taken as billions.
func ParseParams(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	switch {
	case strings.HasSuffix(t, "b"):
		t = t[:len(t)-1]
	case strings.HasSuffix(t, "m"):
		t, mult = t[:len(t)-1], 1e-3
	case strings.HasSuffix(t, "k"):
		t, mult = t[:len(t)-1], 1e-6
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(t, "_", ""), 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("bad parameter count %q (want e.g. 7B, 350M or 1.3e9)", s)
	}
	if mult == 1 && f >= 1e4 {
		mult = 1e-9 // a raw count
	}
	return f * mult, nil
}
