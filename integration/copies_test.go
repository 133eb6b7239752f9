package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNpmrcCopy: ~/.npmrc mixes settings and a registry token. Inside,
// npm's settings read as usual and no boundary is reported, but the
// token is nowhere: not in the file at its path, not through another
// route to it, not in sandboxd's copy under its state; and the original
// is unchanged.
func TestNpmrcCopy(t *testing.T) {
	t.Parallel()
	forModes(t, func(t *testing.T, e *env, layer bool) {
		npmrc := filepath.Join(e.home, ".npmrc")
		e.writeFile(npmrc, "fund=false\n//registry.npmjs.org/:_authToken="+e.canary+"\nproxy=http://u:"+e.canary+"@p:3128\nsave-exact=true\n", 0o600)
		unchanged := fileUnchanged(t, npmrc)
		r := e.sh(strings.Join([]string{
			"cat ~/.npmrc",
			"cat /proc/self/root" + npmrc + " 2>&1",
			"ln -s ~/.npmrc ./link 2>&1; cat ./link 2>&1",
			"cat " + filepath.Join(e.home, ".local", "state", "sandboxd", "copies") + "/*/* 2>&1",
			"umount ~/.npmrc 2>&1; cat ~/.npmrc",
			"echo x >> ~/.npmrc 2>&1",
			"echo END",
		}, "; "))
		if !strings.Contains(r.stdout, "END") {
			t.Fatalf("the command did not run\n%s", r)
		}
		e.noCanary(t, r)
		if !strings.Contains(r.stdout, "fund=false\nsave-exact=true\n") {
			t.Fatalf("the settings are not readable\n%s", r)
		}
		unchanged()
		for _, b := range boundaries(r) {
			if b["operation"] == "read_file" && b["path"] == npmrc {
				t.Fatalf("reading the copy was reported as a boundary\n%s", r)
			}
		}
	})
}
