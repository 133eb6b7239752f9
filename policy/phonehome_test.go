package policy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/golden"
)

// TestPhoneHomeOff: every switch is a plain variable name set once, with
// a value, the tool that reads it and its documentation. (Some share a
// prefix the environment's deny list strips, GH_* or AZURE_*: the
// caller's value is stripped there and the switch set after.)
func TestPhoneHomeOff(t *testing.T) {
	name := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	seen := map[string]bool{}
	for _, sw := range DefaultPhoneHomeOff() {
		if !name.MatchString(sw.Name) || seen[sw.Name] {
			t.Errorf("%q: not a variable name, or listed twice", sw.Name)
		}
		seen[sw.Name] = true
		if sw.Value == "" || sw.Tool == "" || sw.Stops == "" || !strings.HasPrefix(sw.Source, "https://") {
			t.Errorf("%s: value, tool, what it stops and an https source are all needed: %+v", sw.Name, sw)
		}
	}
}

// TestDocumentedPhoneHomeOff: the README's list is the table here (go
// test -update rewrites it).
func TestDocumentedPhoneHomeOff(t *testing.T) {
	var b strings.Builder
	for _, sw := range DefaultPhoneHomeOff() {
		fmt.Fprintf(&b, "- `%s=%s`: %s, %s ([source](%s))\n", sw.Name, sw.Value, sw.Tool, sw.Stops, sw.Source)
	}
	golden.Block(t, "../README.md", "phone-home-off", []byte(b.String()))
}
