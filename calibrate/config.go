package calibrate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"

	"github.com/startlux/startlux/decide"
	"github.com/startlux/startlux/eval"
	"github.com/startlux/startlux/internal/atomicfile"
)

// BackupSuffix is appended to decision_config.json's name for the copy of
// the config a write replaces.
const BackupSuffix = ".bak"

// UpdateConfig returns the decision config data with p's temperature_by_type
// and, when setPrior, its position_prior (removed when p has none); every
// other field keeps its value and place. The result is checked by
// decide.ParseConfig.
func UpdateConfig(data []byte, p *Params, setPrior bool) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%s: not a JSON object", decide.ConfigFile)
	}
	type member struct {
		key string
		raw json.RawMessage
	}
	var ms []member
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", decide.ConfigFile, err)
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: %w", decide.ConfigFile, err)
		}
		ms = append(ms, member{t.(string), raw})
	}
	if _, err := d.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", decide.ConfigFile, err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: data after the object", decide.ConfigFile)
	}

	var temps bytes.Buffer // in the order of the types, not the map's
	temps.WriteByte('{')
	n := 0
	for _, t := range eval.Types {
		if T, ok := p.TemperatureByType[string(t)]; ok {
			if n > 0 {
				temps.WriteByte(',')
			}
			fmt.Fprintf(&temps, "%q:%s", t, formatFloat(T))
			n++
		}
	}
	temps.WriteByte('}')
	set := map[string]json.RawMessage{"temperature_by_type": temps.Bytes()}
	if setPrior {
		set["position_prior"] = nil
		if len(p.PositionPrior) > 0 {
			b, err := json.Marshal(p.PositionPrior)
			if err != nil {
				return nil, err
			}
			set["position_prior"] = b
		}
	}
	var out bytes.Buffer
	out.WriteString("{")
	first := true
	put := func(key string, raw json.RawMessage) {
		if raw == nil {
			return
		}
		if !first {
			out.WriteString(",")
		}
		first = false
		k, _ := json.Marshal(key)
		out.WriteString("\n  ")
		out.Write(k)
		out.WriteString(": ")
		var ind bytes.Buffer
		json.Indent(&ind, raw, "  ", "  ") // raw is valid JSON: it was decoded
		out.Write(ind.Bytes())
	}
	for _, m := range ms {
		if raw, ok := set[m.key]; ok {
			put(m.key, raw)
			delete(set, m.key)
			continue
		}
		put(m.key, m.raw)
	}
	for _, k := range []string{"temperature_by_type", "position_prior"} {
		if raw, ok := set[k]; ok {
			put(k, raw)
		}
	}
	out.WriteString("\n}\n")
	if _, err := decide.ParseConfig(out.Bytes()); err != nil {
		return nil, fmt.Errorf("the updated config does not read back: %w", err)
	}
	return out.Bytes(), nil
}

// formatFloat writes a temperature with ten significant digits (the fit
// is good to about 1e-9).
func formatFloat(x float64) string { return strconv.FormatFloat(x, 'g', 10, 64) }

// WriteConfig replaces dir's decision_config.json with data atomically (a
// synced temporary file renamed over it), keeping the old one as
// decision_config.json.bak.
func WriteConfig(dir string, data []byte) error {
	if dir == "" {
		return errors.New("no checkpoint directory to write to")
	}
	path := filepath.Join(dir, decide.ConfigFile)
	return atomicfile.WriteFile(path, data, 0o644, path+BackupSuffix)
}
