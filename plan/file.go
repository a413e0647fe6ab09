package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes p as indented JSON, atomically (temp file + rename), so apply never reads a
// half-written plan.
func WriteFile(path string, p *Plan) error {
	b, err := Marshal(p)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".plan-*.json")
	if err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write plan %s: %w", path, err)
	}
	return nil
}

// Marshal renders p as the plan file's JSON.
func Marshal(p *Plan) ([]byte, error) {
	if p.Version == 0 {
		p.Version = FormatVersion
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode plan: %w", err)
	}
	return append(b, '\n'), nil
}

// ReadFile reads and validates a plan file.
func ReadFile(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	defer f.Close()
	p, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("read plan %s: %w", path, err)
	}
	return p, nil
}

// ErrVersion means the plan file was written in a format this enginemig does not read.
var ErrVersion = errors.New("unsupported plan file version")

// Decode reads a plan strictly: the version must be FormatVersion, unknown fields and trailing
// data are errors, and every finding must have a check id and a known severity.
func Decode(r io.Reader) (*Plan, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var head struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("not a plan file (malformed JSON): %w", err)
	}
	if head.Version == nil {
		return nil, fmt.Errorf("%w: no \"version\" field", ErrVersion)
	}
	if *head.Version != FormatVersion {
		return nil, fmt.Errorf("%w %d (this enginemig reads version %d): run plan again with this enginemig", ErrVersion, *head.Version, FormatVersion)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("malformed plan file: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("malformed plan file: data after the plan object")
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("malformed plan file: %w", err)
	}
	p.Server.setVersion(p.Server.Version)
	return &p, nil
}

func (p *Plan) validate() error {
	if p.Server == nil {
		return errors.New("no \"server\" section")
	}
	check := func(where string, fs []Finding) error {
		for i, f := range fs {
			if f.Check == "" || !f.Severity.Valid() {
				return fmt.Errorf("%s finding %d: missing check id or severity", where, i)
			}
		}
		return nil
	}
	if err := check("server", p.Findings); err != nil {
		return err
	}
	for _, t := range p.Tables {
		if t.Schema == "" || t.Table == "" {
			return errors.New("a table without schema or name")
		}
		if err := check(t.Schema+"."+t.Table, t.Findings); err != nil {
			return err
		}
		// A hand-edited file must not unblock a table by flipping the flag.
		if blocked := len(Blockers(t.Findings)) > 0; blocked != t.Blocked {
			return fmt.Errorf("%s.%s: \"blocked\" is %v but its findings say %v", t.Schema, t.Table, t.Blocked, blocked)
		}
	}
	return nil
}
