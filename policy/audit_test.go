package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// [audit]: the caller's own log's rotation and retention, set by the
// user's own policy only, with bounds.
func TestAuditTable(t *testing.T) {
	for _, tc := range []struct {
		toml string
		want Audit
		err  string
	}{
		{"", Audit{RotateSize: 64 * MiB}, ""},
		{"[audit]\nrotate_size = \"8MiB\"\nretain_age = \"2160h\"\nretain_size = \"1GiB\"\n",
			Audit{RotateSize: 8 * MiB, RetainAge: Duration(2160 * time.Hour), RetainSize: GiB}, ""},
		{"[audit]\nretain_age = \"0s\"\nretain_size = \"0\"\n", Audit{RotateSize: 64 * MiB}, ""},
		{"[audit]\nrotate_size = \"100KiB\"\n", Audit{}, "audit.rotate_size: must be at least"},
		{"[audit]\nretain_age = \"10m\"\n", Audit{}, "audit.retain_age: must be between"},
		{"[audit]\nretain_size = \"1KiB\"\n", Audit{}, "audit.retain_size: must be at least"},
		{"[audit]\nkeep = 1\n", Audit{}, "unknown key"},
	} {
		p, err := Parse("p.toml", []byte(tc.toml), Default())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.toml, err, tc.err)
			}
			continue
		}
		if err != nil || p.Audit != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.toml, p.Audit, err, tc.want)
		}
	}
	// A workspace may not set it.
	dir := t.TempDir()
	user, ws := filepath.Join(dir, "policy.toml"), filepath.Join(dir, ".sandboxd.toml")
	os.WriteFile(user, []byte("[audit]\nretain_age = \"720h\"\n"), 0o644)
	os.WriteFile(ws, []byte("[audit]\nretain_age = \"1h\"\n"), 0o644)
	if _, err := Load(user, true, ws); err == nil || !strings.Contains(err.Error(), "only your own policy may set audit.retain_age") {
		t.Fatalf("a workspace set the audit log's retention: %v", err)
	}
}
