package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/policy"
)

// TestWithPhoneHomeOff: every switch is set once; a name the caller's
// environment sets keeps the caller's value; nothing else changes.
func TestWithPhoneHomeOff(t *testing.T) {
	in := []string{"PATH=/usr/bin", "NO_UPDATE_NOTIFIER=", "npm_config_update_notifier=true", "NPM_CONFIG_AUDIT=true"}
	out := withPhoneHomeOff(slices.Clone(in))
	if !slices.Equal(out[:len(in)], in) {
		t.Fatalf("the caller's entries changed: %q", out[:len(in)])
	}
	count := map[string]int{}
	for _, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		count[k]++
	}
	for _, sw := range policy.DefaultPhoneHomeOff() {
		if sw.Name == "npm_config_audit" {
			if count[sw.Name] != 0 {
				t.Errorf("npm_config_audit was set although the caller set NPM_CONFIG_AUDIT")
			}
			continue
		}
		if count[sw.Name] != 1 {
			t.Errorf("%s appears %d times", sw.Name, count[sw.Name])
		}
		if sw.Name != "NO_UPDATE_NOTIFIER" && sw.Name != "npm_config_update_notifier" && !slices.Contains(out, sw.Name+"="+sw.Value) {
			t.Errorf("%s=%s is missing", sw.Name, sw.Value)
		}
	}
}
