package publictext

import "testing"

// TestProblemsCatch: each mark Problems knows fires on the
// kind of sentence it is for, and not on sandboxd's own words.
func TestProblemsCatch(t *testing.T) {
	prefixes := []string{"landlock", "sandbox", "layer"}
	for _, bad := range []string{
		"sandboxd: read the report: open /tmp/r.json: no such file or directory",
		"cannot enforce the policy on this kernel: landlock: not supported by this kernel",
		"sandboxd: sandbox: state directory: mkdir /home/u/.local/state/sandboxd: permission denied",
		"the interrupted commit failed: layer: recover 0123: unreadable journal",
		"stdin relay: read |0: bad file descriptor",
		"x.json is not a report: json: cannot unmarshal string into Go struct field",
		"the model could not be reached: dial tcp 10.0.0.1:443: i/o timeout",
		"not committed: cannot be reached in the workspace: /home/u/.local/state/sandboxd/txn/0123.stage/x",
		"private cache /home/u/.local/state/sandboxd/cache/ab12: lstat failed",
		"corpus: strconv.Atoi: parsing \"x\": invalid syntax",
		"fork/exec /bin/x: exec format error",
		"the policy could not be read: toml: expected a table",
		"git history the command wrote names the object 0123, which sandboxd cannot read (zlib: invalid header)",
	} {
		if len(Problems(bad, prefixes)) == 0 {
			t.Errorf("not caught: %q", bad)
		}
	}
	for _, good := range []string{
		"sandboxd: workspace /home/u/missing does not exist",
		"sandboxd: the report could not be written to /tmp/x/r.json (no such file or directory)",
		"sandboxd: /tmp/x/notexec.sh: not executable (permission denied)",
		"namespaces are unavailable here (operation not permitted)",
		"sandboxd: denied write_file /etc/x",
		"/home/u/.config/sandboxd/policy.toml:2: limits.pids: must not be negative (got -1)",
		"your policy: boundaries: rule \"fs x\" is not one sandboxd can apply (run with -v to log why)",
		"sandboxd's own configuration and state are never opened to a sandboxed command",
		"sandboxd: /tmp/x/no-such-policy.toml: cannot read policy file (no such file or directory)",
	} {
		if p := Problems(good, prefixes); len(p) != 0 {
			t.Errorf("%q flagged: %q", good, p)
		}
	}
}

// TestOwnErrorPrefixes: the module's own prefixes are found from a
// package's directory, as a package's test finds them.
func TestOwnErrorPrefixes(t *testing.T) {
	prefixes, err := ModulePrefixes()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, p := range prefixes {
		have[p] = true
	}
	for _, want := range []string{"landlock", "sandbox", "layer", "cgroup", "kernelaudit"} {
		if !have[want] {
			t.Errorf("the module's error prefixes %q lack %q", prefixes, want)
		}
	}
	if have["sandboxd"] {
		t.Errorf("%q is every CLI line's start, not an error prefix", "sandboxd")
	}
}
