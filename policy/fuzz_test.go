package policy

import (
	"errors"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"profile = \"strict\"\nisolation = \"namespaces\"\n",
		"[filesystem]\nwritable = [\"/a\", \"~/b\"]\nsecrets = [\"~/.x/*.key\"]\nallow_secrets = [\"~/.npmrc\"]\nhome_allow = [\"~/c\"]\nprotected = [\".hooks\"]\n",
		"[env]\nallow = [\"A_*\"]\ndeny = [\"*B*\"]\n",
		"[limits]\npids = 100\nmemory = \"1GiB\"\nfile_size = 1048576\ntmp_size = \"2M\"\n",
		"limits = { pids = 20, pids = 30 }\n",
		"[limits]\nfoo = 1\n",
		"[[limits]]\n",
		"profile.x = 1\n",
		"[filesystem]\nprotected = [\"../x\"]\n",
		"a.b.c = [[1], {x = 2}]\n",
		"\"\\u0000\" = '''\n'''\n",
		"[policy.limits]\npids = 64\n[access]\nuids = [1]\n",
		"policy = { profile = \"strict\" }\nPolicy.x = 1\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The same bytes as a machine configuration's [policy]: the
		// same error form, and a machine policy any user policy merges
		// under.
		if mp, mkeys, err := ParseTable("fuzz.toml", data, "policy"); err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "fuzz.toml" || pe.Line <= 0 {
				t.Fatalf("ParseTable error without file or line: %v", err)
			}
		} else if _, err := UnderMachine(Machine{Policy: mp, Set: mkeys, File: "m"}, Default(), "u", KeySet{}); err != nil {
			t.Fatalf("a machine policy alone did not merge: %v", err)
		}
		p, keys, err := ParseWithKeys("fuzz.toml", data, Default())
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if pe.File != "fuzz.toml" || pe.Line <= 0 {
				t.Fatalf("error without file or line: %#v", pe)
			}
			return
		}
		for _, k := range keys.Keys() {
			if keys.Line(k) <= 0 {
				t.Fatalf("key %s without a line", k)
			}
		}
		if key, msg := validatePolicy(ruleSchema(), &p); msg != "" {
			t.Fatalf("Parse accepted an invalid policy: %s: %s", key, msg)
		}
		if _, err := Tighten(Default(), p, "fuzz.toml", keys); err != nil {
			var pe *Error
			if !errors.As(err, &pe) || pe.Line <= 0 {
				t.Fatalf("Tighten error without line: %v", err)
			}
		}
		if _, err := p.Resolve(Dirs{Home: "/nonexistent/home"}); err != nil {
			// home_allow entries outside $HOME are only detectable here.
			if p.Profile != ProfileStrict {
				t.Fatalf("Resolve failed on a parsed policy: %v", err)
			}
		}
	})
}
