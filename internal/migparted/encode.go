package migparted

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Encode writes c as a mig-parted config file (`version: v1`). The output is deterministic:
// configs in slice order, entry fields in mig-parted's order (device-filter, devices, mig-enabled,
// mig-devices), device filters as flow lists, profiles sorted by name and quoted. Encode refuses a
// Config that fails Check, so everything it writes decodes again: Decode(Encode(c)) equals c for
// every c that Decode returned.
func Encode(c *Config) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("encode mig-parted config: nil config")
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("encode mig-parted config: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("version: " + Version + "\n")
	b.WriteString("mig-configs:\n")
	for i, nc := range c.Configs {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "  %s:\n", yamlKey(nc.Name))
		for _, e := range nc.Entries {
			writeEntry(&b, e)
		}
	}
	return b.Bytes(), nil
}

func writeEntry(b *bytes.Buffer, e Entry) {
	lead := "    - "
	if e.DeviceFilter != nil {
		quoted := make([]string, len(e.DeviceFilter))
		for i, id := range e.DeviceFilter {
			quoted[i] = quote(id)
		}
		fmt.Fprintf(b, "%sdevice-filter: [%s]\n", lead, strings.Join(quoted, ", "))
		lead = "      "
	}
	fmt.Fprintf(b, "%sdevices: %s\n", lead, e.Devices)
	fmt.Fprintf(b, "      mig-enabled: %t\n", e.MigEnabled)
	if !e.MigEnabled {
		return
	}
	if len(e.MigDevices) == 0 {
		b.WriteString("      mig-devices: {}\n")
		return
	}
	b.WriteString("      mig-devices:\n")
	for _, name := range sortedKeys(e.MigDevices) {
		fmt.Fprintf(b, "        %s: %d\n", quote(name), e.MigDevices[name])
	}
}

// plainKey matches config names that YAML reads back as the same string without quotes.
var plainKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*$`)

// yamlKey writes a config name plainly where that is safe (as NVIDIA's files do) and quoted
// otherwise. YAML 1.1 reads y/n/yes/no/on/off/true/false/null as non-strings, so those are quoted.
func yamlKey(s string) string {
	switch strings.ToLower(s) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return quote(s)
	}
	if plainKey.MatchString(s) {
		return s
	}
	return quote(s)
}

// quote writes s as a YAML double-quoted scalar. Everything outside printable ASCII is escaped, so
// the output is plain ASCII whatever s holds.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02X`, s[i]) // not UTF-8; Decode never yields this
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02X`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			fmt.Fprintf(&b, `\U%08X`, r)
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
