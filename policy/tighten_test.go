package policy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// merge parses user and ws as Load does and tightens.
func merge(t *testing.T, userDoc, wsDoc string) (Policy, error) {
	t.Helper()
	user, err := Parse("user.toml", []byte(userDoc), Default())
	if err != nil {
		t.Fatalf("user policy: %v", err)
	}
	ws, keys, err := ParseWithKeys("ws.toml", []byte(wsDoc), user)
	if err != nil {
		t.Fatalf("workspace policy: %v", err)
	}
	return Tighten(user, ws, "ws.toml", keys)
}

func TestTightenAllowed(t *testing.T) {
	tests := []struct {
		name string
		user string
		ws   string
		want func(p *Policy) // edits the parsed user policy into the expected result
	}{
		{"empty workspace policy", "profile = \"strict\"\n[env]\nallow = [\"A\"]\n", "", func(p *Policy) {}},
		{"union secrets", "[filesystem]\nsecrets = [\"/a\", \"/b\"]\n", "[filesystem]\nsecrets = [\"/c\", \"/a\", \"/c\"]\n",
			func(p *Policy) { p.Filesystem.Secrets = []string{"/a", "/b", "/c"} }},
		{"union protected", "", "[filesystem]\nprotected = [\"tools/hooks\"]\n",
			func(p *Policy) { p.Filesystem.Protected = []string{"tools/hooks"} }},
		{"union env deny", "[env]\ndeny = [\"X\"]\n", "[env]\ndeny = [\"Y_*\"]\n",
			func(p *Policy) { p.Env.Deny = []string{"X", "Y_*"} }},
		{"union with empty keeps user", "[env]\ndeny = [\"X\"]\n", "[env]\ndeny = []\n", func(p *Policy) {}},
		{"subset writable narrows", "[filesystem]\nwritable = [\"/x\", \"/y\"]\n", "[filesystem]\nwritable = [\"/y/\"]\n",
			func(p *Policy) { p.Filesystem.Writable = []string{"/y"} }},
		{"subset present but empty", "[filesystem]\nwritable = [\"/x\"]\n", "[filesystem]\nwritable = []\n",
			func(p *Policy) { p.Filesystem.Writable = []string{} }},
		{"subset absent keeps user", "[filesystem]\nwritable = [\"/x\"]\n", "[filesystem]\nsecrets = []\n",
			func(p *Policy) { p.Filesystem.Secrets = nil }},
		{"subset env allow", "[env]\nallow = [\"A\", \"B\"]\n", "[env]\nallow = [\"B\"]\n",
			func(p *Policy) { p.Env.Allow = []string{"B"} }},
		{"subset allow_secrets re-denies", "[filesystem]\nallow_secrets = [\"~/.npmrc\", \"~/.pypirc\"]\n", "[filesystem]\nallow_secrets = []\n",
			func(p *Policy) { p.Filesystem.AllowSecrets = []string{} }},
		{"subset home_allow", "profile = \"strict\"\n[filesystem]\nhome_allow = [\"~/a\"]\n", "[filesystem]\nhome_allow = [\"~/a\"]\n", func(p *Policy) {}},
		{"min lowers limits", "", "[limits]\npids = 64\nmemory = \"1GiB\"\nfile_size = \"16GiB\"\ntmp_size = \"64MiB\"\n",
			func(p *Policy) {
				p.Limits = Limits{Pids: 64, Memory: GiB, FileSize: 16 * GiB, TmpSize: 64 * MiB, LayerSize: 4 * GiB, CacheSize: 20 * GiB}
			}},
		{"profile raises", "", "profile = \"strict\"\n", func(p *Policy) { p.Profile = "strict" }},
		{"profile keeps", "profile = \"strict\"\n", "profile = \"strict\"\n", func(p *Policy) {}},
		{"isolation raises from landlock-only", "isolation = \"landlock-only\"\n", "isolation = \"auto\"\n", func(p *Policy) { p.Isolation = "auto" }},
		{"isolation raises to namespaces", "", "isolation = \"namespaces\"\n", func(p *Policy) { p.Isolation = "namespaces" }},
		{"review off", "[review]\nmodel = \"m\"\n", "[review]\nenabled = false\n", func(p *Policy) { p.Review.Enabled = false }},
		{"review lowers timeout and caps", "", "[review]\ntimeout = \"5s\"\nmax_calls_per_hour = 10\n",
			func(p *Policy) { p.Review.Timeout = Duration(5e9); p.Review.MaxCallsPerHour = 10 }},
		{"review lowers the user's ceiling", "", "[review]\nmax_user_calls_per_hour = 50\nmax_user_tokens_per_hour = 0\n",
			func(p *Policy) { p.Review.MaxUserCallsPerHour = 50; p.Review.MaxUserTokensPerHour = 0 }},
		{"network per connection", "", "[network]\ngrant_scope = \"connection\"\nhold_timeout = \"30s\"\n",
			func(p *Policy) { p.Network.GrantScope = ScopeConnection; p.Network.HoldTimeout = Duration(30e9) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := merge(t, tt.user, tt.ws)
			if err != nil {
				t.Fatalf("Tighten: %v", err)
			}
			want, _ := Parse("user.toml", []byte(tt.user), Default())
			tt.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestTightenRejects(t *testing.T) {
	tests := []struct {
		name string
		user string
		ws   string
		want string // exact error
	}{
		{"add writable root", "[filesystem]\nwritable = [\"/x\"]\n", "[filesystem]\nwritable = [\n  \"/x\",\n  \"/home/u\",\n]\n",
			`ws.toml:4: filesystem.writable: workspace policy may only tighten: adds writable root "/home/u"`},
		{"add env allow", "", "[env]\nallow = [\"FOO\"]\n",
			`ws.toml:2: env.allow: workspace policy may only tighten: adds env allow entry "FOO"`},
		{"drop a secret via allow_secrets", "", "[filesystem]\nallow_secrets = [\"~/.ssh\"]\n",
			`ws.toml:2: filesystem.allow_secrets: workspace policy may only tighten: adds allow_secrets entry (exposing a secret) "~/.ssh"`},
		{"add home_allow", "profile = \"strict\"\n", "[filesystem]\nhome_allow = [\"~/.ssh\"]\n",
			`ws.toml:2: filesystem.home_allow: workspace policy may only tighten: adds home_allow entry "~/.ssh"`},
		{"raise pids", "", "[limits]\npids = 9999\n",
			`ws.toml:2: limits.pids: workspace policy may only tighten: raises limits.pids from 4096 to 9999`},
		{"raise memory", "[limits]\nmemory = \"4GiB\"\n", "limits.memory = \"16GiB\"\n",
			`ws.toml:1: limits.memory: workspace policy may only tighten: raises limits.memory from 4GiB to 16GiB`},
		{"raise tmp_size", "", "[limits]\ntmp_size = \"2GiB\"\n",
			`ws.toml:2: limits.tmp_size: workspace policy may only tighten: raises limits.tmp_size from 1GiB to 2GiB`},
		{"loosen profile", "profile = \"strict\"\n", "\nprofile = \"default\"\n",
			`ws.toml:2: profile: workspace policy may only tighten: loosens profile from "strict" to "default"`},
		{"loosen isolation", "", "isolation = \"landlock-only\"\n",
			`ws.toml:1: isolation: workspace policy may only tighten: loosens isolation from "auto" to "landlock-only"`},
		{"loosen isolation from namespaces", "isolation = \"namespaces\"\n", "isolation = \"auto\"\n",
			`ws.toml:1: isolation: workspace policy may only tighten: loosens isolation from "namespaces" to "auto"`},
		{"choose the model", "", "[review]\nmodel = \"cheap\"\n",
			`ws.toml:2: review.model: only your own policy may set review.model (a workspace must not choose the reviewer, its endpoint or key, or trim what it is shown)`},
		{"choose the endpoint", "", "[review]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
			`ws.toml:2: review.base_url: only your own policy may set review.base_url (a workspace must not choose the reviewer, its endpoint or key, or trim what it is shown)`},
		{"choose the key variable", "", "[review]\napi_key_env = \"HOME\"\n",
			`ws.toml:2: review.api_key_env: only your own policy may set review.api_key_env (a workspace must not choose the reviewer, its endpoint or key, or trim what it is shown)`},
		{"trim the evidence", "", "[review]\nmax_input_tokens = 2048\n",
			`ws.toml:2: review.max_input_tokens: only your own policy may set review.max_input_tokens (a workspace must not choose the reviewer, its endpoint or key, or trim what it is shown)`},
		{"turn the model on", "[review]\nenabled = false\n", "[review]\nenabled = true\n",
			`ws.toml:2: review.enabled: workspace policy may only tighten: turns review.enabled on`},
		{"raise the timeout", "", "[review]\ntimeout = \"60s\"\n",
			`ws.toml:2: review.timeout: workspace policy may only tighten: raises review.timeout from 30s to 1m0s`},
		{"raise the user's call ceiling", "", "[review]\nmax_user_calls_per_hour = 601\n",
			`ws.toml:2: review.max_user_calls_per_hour: workspace policy may only tighten: raises review.max_user_calls_per_hour from 600 to 601`},
		{"raise the user's token ceiling", "[review]\nmax_user_tokens_per_hour = 10\n", "[review]\nmax_user_tokens_per_hour = 11\n",
			`ws.toml:2: review.max_user_tokens_per_hour: workspace policy may only tighten: raises review.max_user_tokens_per_hour from 10 to 11`},
		{"per-run scope back", "[network]\ngrant_scope = \"connection\"\n", "[network]\ngrant_scope = \"run\"\n",
			`ws.toml:2: network.grant_scope: workspace policy may only tighten: loosens network.grant_scope from "connection" to "run"`},
		{"choose the resolver", "", "[network]\nresolver = \"127.0.0.1:53\"\n",
			`ws.toml:2: network.resolver: only your own policy may set network.resolver (a workspace must not choose how names are resolved)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := merge(t, tt.user, tt.ws)
			if err == nil {
				t.Fatal("Tighten succeeded, want error")
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *Error", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error %q\nwant  %q", err, tt.want)
			}
		})
	}
}

// TestEveryFieldHasTightenTag walks the Policy type: every leaf key must
// carry a known tighten rule suited to its type, so that a new key without
// a rule fails CI rather than being loosenable by a workspace.
func TestEveryFieldHasTightenTag(t *testing.T) {
	known := []string{ruleUnion, ruleSubset, ruleMin, ruleProfile, ruleIsolation, ruleUser, ruleScope, ruleOff}
	n := 0
	var walk func(tp reflect.Type, path string)
	walk = func(tp reflect.Type, path string) {
		for i := 0; i < tp.NumField(); i++ {
			f := tp.Field(i)
			if !f.IsExported() {
				t.Errorf("%s%s: unexported fields are not allowed in the policy schema", path, f.Name)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s%s: missing toml tag", path, f.Name)
				continue
			}
			if f.Type.Kind() == reflect.Struct && !isText(f.Type) {
				if _, ok := f.Tag.Lookup("tighten"); ok {
					t.Errorf("%s%s: a table must not carry a tighten tag", path, name)
				}
				walk(f.Type, path+name+".")
				continue
			}
			n++
			rule, ok := f.Tag.Lookup("tighten")
			switch {
			case !ok:
				t.Errorf("%s%s: missing tighten tag", path, name)
			case !slices.Contains(known, rule):
				t.Errorf("%s%s: unknown tighten rule %q", path, name, rule)
			case !ruleFits(rule, f.Type):
				t.Errorf("%s%s: tighten rule %q does not suit %s", path, name, rule, f.Type)
			}
		}
	}
	walk(reflect.TypeFor[Policy](), "")
	if n != len(leaves(policyType())) || n < 13 {
		t.Errorf("walked %d leaves, leaves() reports %d", n, len(leaves(policyType())))
	}
	if err := checkTightenTags(policyType()); err != nil {
		t.Error(err)
	}
}

// TestTightenFailsClosed checks that a key without a rule, or with an
// unknown or unsuitable rule, makes the merge fail even when the workspace
// does not set it.
func TestTightenFailsClosed(t *testing.T) {
	type noTag struct {
		A []string `toml:"a" tighten:"union"`
		B int64    `toml:"b"`
	}
	type unknownTag struct {
		T struct {
			A string `toml:"a" tighten:"maybe"`
		} `toml:"t"`
	}
	type wrongType struct {
		A string `toml:"a" tighten:"min"`
	}
	for _, v := range []any{noTag{}, unknownTag{}, wrongType{}} {
		rv := reflect.ValueOf(v)
		out := reflect.New(rv.Type()).Elem()
		s := &schema{pt: rv.Type(), leaves: leaves(rv.Type()), tagErr: checkTightenTags(rv.Type())}
		err := tightenInto(s, out, rv, rv, "ws.toml", KeySet{})
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Msg, "internal error") {
			t.Errorf("%T: got %v, want a fail-closed error", v, err)
		}
	}
}
