package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// underMachine parses the machine's [policy] and a user's policy as the
// daemon and LoadUnder do, and merges the user's under the machine's.
func underMachine(t *testing.T, machineDoc, userDoc string) (Policy, error) {
	t.Helper()
	mp, mset, err := ParseTable("sandboxd.toml", []byte("[access]\nuids = [1]\n"+machineDoc), "policy")
	if err != nil {
		t.Fatalf("machine policy: %v", err)
	}
	user, uset, err := ParseWithKeys("user.toml", []byte(userDoc), Default())
	if err != nil {
		t.Fatalf("user policy: %v", err)
	}
	return UnderMachine(Machine{Policy: mp, Set: mset, File: "sandboxd.toml"}, user, "user.toml", uset)
}

// TestUnderMachineTightens: for every rule kind, a user's value that
// tightens the machine's is kept, and a key the machine leaves alone
// stays the user's.
func TestUnderMachineTightens(t *testing.T) {
	tests := []struct {
		name, machine, user string
		want                func(p *Policy) // edits the parsed user policy into the result
	}{
		{"no machine keys: the user's own", "", "profile = \"strict\"\n[limits]\npids = 100000\n[filesystem]\nwritable = [\"/srv\"]\n", func(*Policy) {}},
		{"machine key the user leaves alone", "[policy.limits]\npids = 512\n", "", func(p *Policy) { p.Limits.Pids = 512 }},
		{"union: machine and user deny both", "[policy.boundaries]\ndeny = [\"net connect *:25\"]\n", "[boundaries]\ndeny = [\"fs read /srv/**\"]\n",
			func(p *Policy) { p.Boundaries.Deny = []string{"net connect *:25", "fs read /srv/**"} }},
		{"union: machine secrets kept when the user sets none", "[policy.filesystem]\nsecrets = [\"/opt/keys\"]\n", "[filesystem]\nsecrets = []\n",
			func(p *Policy) { p.Filesystem.Secrets = []string{"/opt/keys"} }},
		{"subset: a narrower writable list", "[policy.filesystem]\nwritable = [\"/srv\", \"/data\"]\n", "[filesystem]\nwritable = [\"/data\"]\n", func(*Policy) {}},
		{"subset: env allow the machine lists", "[policy.env]\nallow = [\"A\", \"B\"]\n", "[env]\nallow = [\"B\"]\n", func(*Policy) {}},
		{"min: a lower limit", "[policy.limits]\npids = 512\nmemory = \"4GiB\"\n", "[limits]\npids = 64\nmemory = \"1GiB\"\n", func(*Policy) {}},
		{"min: a shorter review timeout", "[policy.review]\ntimeout = \"20s\"\n", "[review]\ntimeout = \"5s\"\n", func(*Policy) {}},
		{"profile: strict under strict", "[policy]\nprofile = \"strict\"\n", "profile = \"strict\"\n", func(*Policy) {}},
		{"isolation: namespaces over auto", "[policy]\nisolation = \"auto\"\n", "isolation = \"namespaces\"\n", func(*Policy) {}},
		{"scope: connection over run", "[policy.network]\ngrant_scope = \"run\"\n", "[network]\ngrant_scope = \"connection\"\n", func(*Policy) {}},
		{"off: the user turns capture off", "[policy.network]\ncapture = true\n", "[network]\ncapture = false\n", func(*Policy) {}},
		{"user rule: the same value", "[policy.network]\nresolver = \"127.0.0.1:53\"\n", "[network]\nresolver = \"127.0.0.1:53\"\n", func(*Policy) {}},
		{"user rule: the machine's when the user sets none", "[policy.limits]\ncache_size = \"1GiB\"\n", "", func(p *Policy) { p.Limits.CacheSize = GiB }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := underMachine(t, tt.machine, tt.user)
			if err != nil {
				t.Fatalf("UnderMachine: %v", err)
			}
			want, _ := Parse("user.toml", []byte(tt.user), Default())
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestUnderMachineRefusesLoosening: for every rule kind, a user's value
// that loosens what the machine sets is an error naming the user's
// file, the line and the key; nothing is clamped.
func TestUnderMachineRefusesLoosening(t *testing.T) {
	tests := []struct {
		name, machine, user string
		want                string
	}{
		{"subset: a writable root the machine does not list", "[policy.filesystem]\nwritable = [\"/srv\"]\n", "[filesystem]\nwritable = [\n  \"/srv\",\n  \"/etc\",\n]\n",
			`user.toml:4: filesystem.writable: the machine's policy (sandboxd.toml) may only be tightened: adds writable root "/etc"`},
		{"subset: boundaries allow when the machine sets none", "[policy.boundaries]\nallow = []\n", "[boundaries]\nallow = [\"net connect example.com:443\"]\n",
			`user.toml:2: boundaries.allow: the machine's policy (sandboxd.toml) may only be tightened: adds boundaries.allow entry "net connect example.com:443"`},
		{"subset: a secret the machine keeps denied", "[policy.filesystem]\nallow_secrets = []\n", "[filesystem]\nallow_secrets = [\"~/.npmrc\"]\n",
			`user.toml:2: filesystem.allow_secrets: the machine's policy (sandboxd.toml) may only be tightened: adds allow_secrets entry (exposing a secret) "~/.npmrc"`},
		{"min: a higher limit", "[policy.limits]\npids = 512\n", "\n[limits]\npids = 4096\n",
			`user.toml:3: limits.pids: the machine's policy (sandboxd.toml) may only be tightened: raises limits.pids from 512 to 4096`},
		{"min: a longer hold", "[policy.network]\nhold_timeout = \"30s\"\n", "[network]\nhold_timeout = \"60s\"\n",
			`user.toml:2: network.hold_timeout: the machine's policy (sandboxd.toml) may only be tightened: raises network.hold_timeout from 30s to 1m0s`},
		{"profile: default under strict", "[policy]\nprofile = \"strict\"\n", "profile = \"default\"\n",
			`user.toml:1: profile: the machine's policy (sandboxd.toml) may only be tightened: loosens profile from "strict" to "default"`},
		{"isolation: landlock-only under namespaces", "[policy]\nisolation = \"namespaces\"\n", "isolation = \"landlock-only\"\n",
			`user.toml:1: isolation: the machine's policy (sandboxd.toml) may only be tightened: loosens isolation from "namespaces" to "landlock-only"`},
		{"scope: run under connection", "[policy.network]\ngrant_scope = \"connection\"\n", "[network]\ngrant_scope = \"run\"\n",
			`user.toml:2: network.grant_scope: the machine's policy (sandboxd.toml) may only be tightened: loosens network.grant_scope from "connection" to "run"`},
		{"off: capture on when the machine turns it off", "[policy.network]\ncapture = false\n", "[network]\ncapture = true\n",
			`user.toml:2: network.capture: the machine's policy (sandboxd.toml) may only be tightened: turns network.capture on`},
		{"off: the model reviewer on when the machine turns it off", "[policy.review]\nenabled = false\n", "[review]\nenabled = true\n",
			`user.toml:2: review.enabled: the machine's policy (sandboxd.toml) may only be tightened: turns review.enabled on`},
		{"user rule: another resolver", "[policy.network]\nresolver = \"127.0.0.1:53\"\n", "[network]\nresolver = \"10.0.0.1:53\"\n",
			`user.toml:2: network.resolver: the machine's policy (sandboxd.toml) sets network.resolver, and only its operator may change it`},
		{"user rule: skipping the layer", "[policy.transaction]\nno_transaction = []\n", "[transaction]\nno_transaction = [\"npm run dev\"]\n",
			`user.toml:2: transaction.no_transaction: the machine's policy (sandboxd.toml) sets transaction.no_transaction, and only its operator may change it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := underMachine(t, tt.machine, tt.user)
			var pe *Error
			if !errors.As(err, &pe) || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

// TestUnderMachineThenWorkspace: a workspace tightens the merged policy,
// so it may not undo the machine's either.
func TestUnderMachineThenWorkspace(t *testing.T) {
	merged, err := underMachine(t, "[policy.limits]\npids = 512\n", "")
	if err != nil {
		t.Fatal(err)
	}
	ws, keys, err := ParseWithKeys("ws.toml", []byte("[limits]\npids = 1024\n"), merged)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Tighten(merged, ws, "ws.toml", keys); err == nil || !strings.Contains(err.Error(), "raises limits.pids from 512 to 1024") {
		t.Errorf("a workspace raised the machine's limit: %v", err)
	}
}

// TestParseTable: the machine's [policy] is checked as a policy file is,
// its errors naming the document's own keys and lines.
func TestParseTable(t *testing.T) {
	tests := []struct{ doc, want string }{
		{"[access]\nuids = [1]\n[policy]\nprofile = \"lax\"\n", `m.toml:4: policy.profile: invalid value "lax" (want "default", "strict")`},
		{"[policy.limits]\npids = 1\n", `m.toml:2: policy.limits.pids: must be at least 16 (got 1)`},
		{"[policy]\nprofil = \"strict\"\n", `m.toml:2: policy.profil: unknown key (valid keys in [policy]: profile, isolation, filesystem, env, limits, boundaries, quiet, network, review, transaction, audit)`},
		{"[policy]\nProfile = \"strict\"\n", `m.toml:2: policy.Profile: unknown key (keys are case-sensitive; did you mean "profile"?)`},
		{"[policy.limits]\npids = \"many\"\n", `m.toml:2: policy.limits.pids: expected an integer, got a TOML string`},
		{"policy.limits.memory = 12\n", `m.toml:1: policy.limits.memory: must be at least 16MiB (got 12B)`},
	}
	for _, tt := range tests {
		_, _, err := ParseTable("m.toml", []byte(tt.doc), "policy")
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q:\ngot  %v\nwant %s", tt.doc, err, tt.want)
		}
	}
	p, keys, err := ParseTable("m.toml", []byte("[limits]\nmax_execs = 3\n[policy.limits]\npids = 64\n"), "policy")
	if err != nil || p.Limits.Pids != 64 || !keys.Has("limits.pids") || keys.Line("limits.pids") != 4 || keys.Has("limits.max_execs") {
		t.Errorf("ParseTable: %v %d %v", err, p.Limits.Pids, keys.Keys())
	}
}

// TestDecode: another file in the policy's error form.
func TestDecode(t *testing.T) {
	type user struct {
		KeyFile string `toml:"key_file"`
	}
	type doc struct {
		Access struct {
			UIDs []int64 `toml:"uids"`
		} `toml:"access"`
		Users  map[string]user `toml:"users"`
		Policy any             `toml:"policy"`
	}
	tests := []struct{ doc, want string }{
		{"[access]\nuid = [1]\n", `m.toml:2: access.uid: unknown key (valid keys in [access]: uids)`},
		{"[access]\nuids = [\"a\"]\n", `m.toml:2: access.uids: expected an array of integers, got an array containing a TOML string`},
		{"[users.alice]\nkey_fil = \"/k\"\n", `m.toml:2: users.alice.key_fil: unknown key (valid keys in [users.alice]: key_file)`},
		{"[users.alice]\nKey_File = \"/k\"\n", `m.toml:2: users.alice.Key_File: unknown key (keys are case-sensitive; did you mean "key_file"?)`},
		{"[nothing]\n", `m.toml:1: nothing: unknown table (valid top-level keys: access, users, policy)`},
	}
	for _, tt := range tests {
		var d doc
		_, err := Decode("m.toml", []byte(tt.doc), &d)
		if err == nil || err.Error() != tt.want {
			t.Errorf("%q:\ngot  %v\nwant %s", tt.doc, err, tt.want)
		}
	}
	var d doc
	keys, err := Decode("m.toml", []byte("[access]\nuids = [1]\n[users.bob]\nkey_file = \"/k\"\n[policy]\nprofile = \"x\"\n"), &d)
	if err != nil || d.Users["bob"].KeyFile != "/k" || keys.Line("users.bob.key_file") != 4 || keys.Line("access.uids") != 2 {
		t.Errorf("Decode: %v %+v %v", err, d, keys.Keys())
	}
}
