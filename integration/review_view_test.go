package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelSeesOnlyWhatTheCommandSees: script inspection reads with the
// command's own view and identity, or not at all. The command runs
// scripts it cannot read (a root-only 0600 file outside the workspace,
// a file under the caller's masked $XDG_RUNTIME_DIR, a file in the
// host's /tmp, which is private inside, a policy secret and a file the
// strict profile's Landlock rules deny) and one it can (a workspace
// script), then writes outside the workspace so the model is asked: no
// canary of the first kind reaches the model's endpoint, each is named
// with why it was not read, and the workspace script is shown.
func TestModelSeesOnlyWhatTheCommandSees(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		pol := modelPolicy(t, e, m, "profile = \"strict\"\n")
		canaries := map[string]string{}
		var cmd strings.Builder
		unreadable := func(name, p string) {
			canaries[name] = strings.ToUpper(strings.ReplaceAll(name, " ", "")) + "CANARY" + randHex(6)
			fmt.Fprintf(&cmd, "bash %s; ", p)
		}
		// (a) A root-only file: the command never runs as host root.
		rootDir := filepath.Join(e.dir, "rootonly")
		os.Mkdir(rootDir, 0o700)
		rootScript := filepath.Join(rootDir, "x.sh")
		unreadable("root only", rootScript)
		os.WriteFile(rootScript, []byte("echo "+canaries["root only"]+"\n"), 0o600)
		// (b) The caller's runtime directory, masked inside.
		runtime := e.mkdir("runtime", 0o700)
		runtimeScript := filepath.Join(runtime, "x.sh")
		unreadable("runtime dir", runtimeScript)
		e.writeFile(runtimeScript, "echo "+canaries["runtime dir"]+"\n", 0o644)
		// (c) The host's /tmp: the command has a private one.
		tmpScript := filepath.Join("/tmp", "sandboxd-it-"+randHex(6)+".sh")
		unreadable("host tmp", tmpScript)
		e.writeFile(tmpScript, "echo "+canaries["host tmp"]+"\n", 0o644)
		t.Cleanup(func() { os.Remove(tmpScript) })
		// (d) A secret the policy names (never even asked about) and a
		// file only Landlock's rules deny (the strict profile's $HOME).
		secretScript := filepath.Join(e.home, ".ssh", "x.sh")
		unreadable("ssh secret", secretScript)
		e.writeFile(secretScript, "echo "+canaries["ssh secret"]+"\n", 0o600)
		homeScript := filepath.Join(e.home, "notes", "x.sh")
		unreadable("strict home", homeScript)
		e.writeFile(homeScript, "echo "+canaries["strict home"]+"\n", 0o644)
		// (e) A workspace script, which the command can read and run.
		shown := "WORKSPACESCRIPT" + randHex(6)
		e.writeFile(filepath.Join(e.ws, "build.sh"), "echo "+shown+"\n", 0o755)
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		cmd.WriteString("bash ./build.sh; echo x > " + target)
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key", "XDG_RUNTIME_DIR=" + runtime}},
			"run", "--policy", pol, "--reviewer", "model", "-c", cmd.String())
		if !strings.Contains(r.stdout, shown) {
			t.Fatalf("the workspace script did not run\n%s", r)
		}
		for name, c := range canaries {
			if strings.Contains(r.stdout, c) {
				t.Errorf("the command could run the %s script (test premise)\n%s", name, r)
			}
		}
		bodies := strings.Join(m.requests(), "\n")
		if len(m.requests()) == 0 {
			t.Fatalf("the model was never asked\n%s", r)
		}
		for name, c := range canaries {
			if strings.Contains(bodies, c) {
				t.Errorf("the %s script's content reached the model's endpoint", name)
			}
		}
		if !strings.Contains(bodies, shown) {
			t.Errorf("the workspace script was not shown to the model:\n%s", bodies)
		}
		// The runtime directory's path is the value of a variable the
		// command's environment is stripped of: redacted, as such values
		// are wherever they appear.
		if !strings.Contains(bodies, runtimeScript+": not there as the command sees it") &&
			!strings.Contains(bodies, "[REDACTED:env-secret]/x.sh: not there as the command sees it") {
			t.Errorf("the model was not told the runtime directory's script is not there:\n%s", bodies)
		}
		for p, why := range map[string]string{
			rootScript:   "the command may not read it",
			tmpScript:    "not there as the command sees it",
			secretScript: "a protected file, never read",
			homeScript:   "the command may not read it",
		} {
			if !strings.Contains(bodies, p+": "+why) {
				t.Errorf("the model was not told %q about %s:\n%s", why, p, bodies)
			}
		}
	})
}

// TestModelNeverSeesAssignedSecrets: values assigned to secret-looking
// names never reach the model's endpoint, whatever they look like (short
// words here, which no credential shape would catch): in the command
// text, in a script the command runs, and in the .env file that script
// sources. The names stay, and so does what is not a secret's value.
func TestModelNeverSeesAssignedSecrets(t *testing.T) {
	t.Parallel()
	forEach(t, func(t *testing.T, e *env) {
		m := newFakeModel(t, denyAll)
		pol := modelPolicy(t, e, m, "")
		values := map[string]string{}
		for _, k := range []string{"cmd", "cmdflag", "script", "export", "env", "envquoted", "yaml"} {
			values[k] = "pw" + k + randHex(3) // short, lowercase: no shape of its own
		}
		e.writeFile(filepath.Join(e.ws, ".env"), fmt.Sprintf("DB_HOST=db.internal\nDB_PASSWORD=%s\nSTRIPE_SECRET=\"%s\"\nMAX_TOKENS=512\n", values["env"], values["envquoted"]), 0o600)
		e.writeFile(filepath.Join(e.ws, "deploy.sh"), fmt.Sprintf("#!/bin/sh\nset -a\n. ./.env\nexport API_TOKEN=%s\nPGPASSWORD=%s psql -h \"$DB_HOST\" -c 'select 1' || true\ncat > app.yml <<EOF\ndb:\n  password: %s\nEOF\n", values["export"], values["script"], values["yaml"]), 0o755)
		target := filepath.Join(e.mkdir("out", 0o755), "x.txt")
		cmd := fmt.Sprintf("MYSQL_PWD=%s bash ./deploy.sh; ./deploy.sh --db-password %s; echo x > %s", values["cmd"], values["cmdflag"], target)
		r := e.sandboxdOpts(runOpts{env: []string{"FAKE_REVIEW_KEY=fake-review-key"}},
			"run", "--policy", pol, "--reviewer", "model", "-c", cmd)
		bodies := strings.Join(m.requests(), "\n")
		if len(m.requests()) == 0 {
			t.Fatalf("the model was never asked\n%s", r)
		}
		for k, v := range values {
			if strings.Contains(bodies, v) {
				t.Errorf("the value assigned in %s (%s) reached the model's endpoint", k, v)
			}
		}
		for _, kept := range []string{"MYSQL_PWD=", "--db-password", "API_TOKEN=", "PGPASSWORD=", "DB_PASSWORD=", "STRIPE_SECRET=", "password: ", "MAX_TOKENS=512", "db.internal", "deploy.sh"} {
			if !strings.Contains(bodies, kept) {
				t.Errorf("%q was not shown to the model:\n%s", kept, bodies)
			}
		}
	})
}
