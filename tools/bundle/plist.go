package bundle

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ParsePlist decodes an XML property list. Dictionaries become
// map[string]any, arrays []any, strings string, integers int64, reals
// float64, booleans bool, data []byte and dates time.Time.
func ParsePlist(data []byte) (any, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, fmt.Errorf("plist: no <plist> element: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "plist" {
				return nil, fmt.Errorf("plist: root element is <%s>, want <plist>", se.Name.Local)
			}
			break
		}
	}
	v, end, err := plistValue(d)
	if err != nil {
		return nil, err
	}
	if end {
		return nil, errors.New("plist: <plist> holds no value")
	}
	if _, end, err := plistValue(d); err != nil || !end {
		return nil, errors.New("plist: <plist> holds more than one value")
	}
	return v, nil
}

// plistValue reads the next value; end reports that the enclosing element
// closed instead.
func plistValue(d *xml.Decoder) (v any, end bool, err error) {
	for {
		tok, err := d.Token()
		if err != nil {
			return nil, false, fmt.Errorf("plist: %w", err)
		}
		switch t := tok.(type) {
		case xml.EndElement:
			return nil, true, nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return nil, false, fmt.Errorf("plist: stray text %q", t)
			}
		case xml.StartElement:
			v, err := plistElement(d, t)
			return v, false, err
		}
	}
}

func plistElement(d *xml.Decoder, se xml.StartElement) (any, error) {
	switch se.Name.Local {
	case "dict":
		m := map[string]any{}
		for {
			k, end, err := plistValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return m, nil
			}
			key, ok := k.(plistKey)
			if !ok {
				return nil, fmt.Errorf("plist: dict entry without a <key> (found %T)", k)
			}
			if _, dup := m[string(key)]; dup {
				return nil, fmt.Errorf("plist: key %q appears twice", key)
			}
			v, end, err := plistValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return nil, fmt.Errorf("plist: key %q has no value", key)
			}
			if _, ok := v.(plistKey); ok {
				return nil, fmt.Errorf("plist: key %q is followed by another key", key)
			}
			m[string(key)] = v
		}
	case "array":
		a := []any{}
		for {
			v, end, err := plistValue(d)
			if err != nil {
				return nil, err
			}
			if end {
				return a, nil
			}
			if _, ok := v.(plistKey); ok {
				return nil, errors.New("plist: <key> inside an <array>")
			}
			a = append(a, v)
		}
	case "true", "false":
		if err := d.Skip(); err != nil {
			return nil, fmt.Errorf("plist: %w", err)
		}
		return se.Name.Local == "true", nil
	}
	var text string
	if err := d.DecodeElement(&text, &se); err != nil {
		return nil, fmt.Errorf("plist: <%s>: %w", se.Name.Local, err)
	}
	switch se.Name.Local {
	case "key":
		return plistKey(text), nil
	case "string":
		return text, nil
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("plist: <integer>: %w", err)
		}
		return n, nil
	case "real":
		f, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
		if err != nil {
			return nil, fmt.Errorf("plist: <real>: %w", err)
		}
		return f, nil
	case "data":
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
		if err != nil {
			return nil, fmt.Errorf("plist: <data>: %w", err)
		}
		return b, nil
	case "date":
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("plist: <date>: %w", err)
		}
		return t, nil
	}
	return nil, fmt.Errorf("plist: unknown element <%s>", se.Name.Local)
}

// plistKey marks a <key> so a dict can tell keys from string values.
type plistKey string

// Version variables the top-level Info.plist may use; [FillInfoPlist]
// replaces them.
const (
	VersionVar = "$(STARTLUX_VERSION)"
	BuildVar   = "$(STARTLUX_BUILD)"
)

var (
	versionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}$`)
	buildRE   = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}$`)
	anyVarRE  = regexp.MustCompile(`\$\([A-Za-z_][A-Za-z0-9_]*\)`)
)

// FillInfoPlist returns the Info.plist template with the version
// (CFBundleShortVersionString: up to three dot-separated integers) and the
// build number (CFBundleVersion) filled in, and checks the result is a
// property list with a dictionary at its root.
func FillInfoPlist(tmpl []byte, version, build string) ([]byte, error) {
	if !versionRE.MatchString(version) {
		return nil, fmt.Errorf("info.plist: version %q is not up to three dot-separated integers (e.g. 1.2.3)", version)
	}
	if !buildRE.MatchString(build) {
		return nil, fmt.Errorf("info.plist: build %q is not up to three dot-separated integers", build)
	}
	if !bytes.Contains(tmpl, []byte(VersionVar)) {
		return nil, fmt.Errorf("info.plist: template lacks %s", VersionVar)
	}
	out := bytes.ReplaceAll(tmpl, []byte(VersionVar), []byte(version))
	out = bytes.ReplaceAll(out, []byte(BuildVar), []byte(build))
	if v := anyVarRE.Find(out); v != nil {
		return nil, fmt.Errorf("info.plist: unknown variable %s", v)
	}
	v, err := ParsePlist(out)
	if err != nil {
		return nil, fmt.Errorf("info.plist: %w", err)
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("info.plist: root is %T, want a dictionary", v)
	}
	return out, nil
}
