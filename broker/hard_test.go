package broker

import (
	"context"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/grants"
)

// Hard denies come before the model: with a model that allows
// everything (and allow rules that match), none of these is ever put to
// it, and each is denied with source hard-deny.
func TestHardDeniesBeforeModel(t *testing.T) {
	hard := HardDenies{
		Secrets:   []string{"/home/u/.ssh", "/home/u/.aws/credentials"},
		Own:       []string{"/home/u/.config/sandboxd", "/home/u/.local/state/sandboxd"},
		Home:      "/home/u",
		Workspace: "/home/u/proj",
	}
	for _, tc := range []struct {
		name string
		req  grants.Request
	}{
		{"secret read", fsReq(boundary.OpReadFile, "/home/u/.ssh/id_ed25519")},
		{"secret write", fsReq(boundary.OpWriteFile, "/home/u/.aws/credentials")},
		{"own policy", fsReq(boundary.OpWriteFile, "/home/u/.config/sandboxd/policy.toml")},
		{"own state", fsReq(boundary.OpReadFile, "/home/u/.local/state/sandboxd/breaker/x")},
		{"remove home", fsReq(boundary.OpRemoveDir, "/home/u")},
		{"remove root", fsReq(boundary.OpRemoveDir, "/")},
		{"git hook", fsReq(boundary.OpMakeReg, "/home/u/proj/.git/hooks/pre-commit")},
		// A name that starts with two dots is inside the workspace, not
		// above it.
		{"refused write to a dot-dot name", fsReq(boundary.OpWriteFile, "/home/u/proj/..hooks")},
		{"metadata by address", heldReq("169.254.169.254:80", "")},
		{"metadata by name", heldReq("metadata.google.internal:80", "")},
		{"loopback unnamed", heldReq("127.0.0.1:6379", "")},
		{"private unnamed", heldReq("10.0.0.5:5432", "")},
		{"name resolving to link-local", heldReq("a.example.com:443", "169.254.1.1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
			b := New(Config{Hard: hard, Model: model, Grants: grants.NewStore(),
				Rules: Rules{Allow: []Rule{mustRule(t, "fs * /**"), mustRule(t, "net connect *:*")}}})
			res := b.Decide(context.Background(), tc.req)
			if res.Decision.Outcome != Deny || res.Decision.Source != SourceHardDeny || res.Grant != nil {
				t.Fatalf("%+v", res.Decision)
			}
			if model.calls != 0 {
				t.Fatalf("the model was asked %d times", model.calls)
			}
		})
	}
}

// fakeStartup is the start-up locations under /home/u/.bashrc and
// /home/u/.config/systemd/user.
type fakeStartup struct{}

func (fakeStartup) Startup(p string) (string, bool) {
	for _, s := range []string{"/home/u/.bashrc", "/home/u/.config/systemd/user"} {
		if p == s || strings.HasPrefix(p, s+"/") {
			return "a shell or service runs it", true
		}
	}
	return "", false
}

// A change at a start-up location is refused before any reviewer, under
// either of its names, whatever broad allow rule matches; an allow rule
// naming exactly that path (and operation) lets it through to the rules;
// reads are not the guard's business.
func TestStartupHardDenied(t *testing.T) {
	hard := HardDenies{Home: "/home/u", Workspace: "/home/u/proj", Startup: fakeStartup{}}
	link := fsReq(boundary.OpWriteFile, "/home/u/notes")
	link.ResolvedPath = "/home/u/.bashrc"
	for _, tc := range []struct {
		name  string
		req   grants.Request
		allow []string
		want  Outcome
		src   Source
	}{
		{"write", fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), []string{"fs * /**"}, Deny, SourceHardDeny},
		{"create a unit", fsReq(boundary.OpMakeReg, "/home/u/.config/systemd/user/x.service"), []string{"fs write /home/u/**"}, Deny, SourceHardDeny},
		{"remove", fsReq(boundary.OpRemoveFile, "/home/u/.bashrc"), nil, Deny, SourceHardDeny},
		{"through a symlink", link, []string{"fs write_file /home/u/notes"}, Deny, SourceHardDeny},
		{"named exactly", fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), []string{"fs write_file /home/u/.bashrc"}, Allow, SourcePolicy},
		{"named for another operation", fsReq(boundary.OpTruncate, "/home/u/.bashrc"), []string{"fs write_file /home/u/.bashrc"}, Deny, SourceHardDeny},
		{"a glob is not a name", fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), []string{"fs write_file /home/u/.bash?c"}, Deny, SourceHardDeny},
		{"named with escapes", fsReq(boundary.OpWriteFile, "/home/u/.bashrc/a b*"), []string{`fs write_file ~/.bashrc/a\ b\*`}, Allow, SourcePolicy},
		{"an escaped name is that name only", fsReq(boundary.OpWriteFile, "/home/u/.bashrc/ab"), []string{`fs write_file ~/.bashrc/a\*`}, Deny, SourceHardDeny},
		{"a name no clean path has", fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), []string{"fs write_file /home/u/x/../.bashrc"}, Deny, SourceHardDeny},
		{"read", fsReq(boundary.OpReadFile, "/home/u/.bashrc"), []string{"fs read /home/u/**"}, Allow, SourcePolicy},
		{"elsewhere", fsReq(boundary.OpWriteFile, "/home/u/out.txt"), nil, Allow, SourceReviewer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := &fakeReviewer{d: Decision{Outcome: Allow, RiskLevel: RiskLow, UserAuthorization: AuthHigh}}
			var rules Rules
			for _, a := range tc.allow {
				rules.Allow = append(rules.Allow, mustRule(t, a))
			}
			b := New(Config{Hard: hard, Model: model, Grants: grants.NewStore(), Rules: rules})
			res := b.Decide(context.Background(), tc.req)
			if res.Decision.Outcome != tc.want || res.Decision.Source != tc.src {
				t.Fatalf("%+v, want %s by %s", res.Decision, tc.want, tc.src)
			}
			if tc.src == SourceHardDeny && model.calls != 0 {
				t.Fatalf("the model was asked %d times", model.calls)
			}
		})
	}
}

// BeforeAllow is what no allow rule lifts for a suggestion: a start-up
// location even when an exact allow names it, secrets, a deny rule, a
// metadata endpoint; not an ordinary path, nor an address that is only
// not public (a rule naming it opens it).
func TestBeforeAllow(t *testing.T) {
	hard := HardDenies{Home: "/home/u", Workspace: "/home/u/proj", Startup: fakeStartup{}, Secrets: []string{"/home/u/.ssh"}}
	rules := Rules{Allow: []Rule{mustRule(t, "fs write_file /home/u/.bashrc")}, Deny: []Rule{mustRule(t, "fs * /opt/prod/**")}}
	b := New(Config{Hard: hard, Grants: grants.NewStore(), Rules: rules})
	held := func(dest string) grants.Request { r := netReq(dest); r.Held = true; return r }
	for _, tc := range []struct {
		req    grants.Request
		denied bool
	}{
		{fsReq(boundary.OpWriteFile, "/home/u/.bashrc"), true},
		{fsReq(boundary.OpMakeReg, "/home/u/.config/systemd/user/x.service"), true},
		{fsReq(boundary.OpReadFile, "/home/u/.ssh/id_rsa"), true},
		{fsReq(boundary.OpWriteFile, "/opt/prod/x"), true},
		{held("169.254.169.254:80"), true},
		{held("metadata.google.internal:80"), true},
		{fsReq(boundary.OpWriteFile, "/home/u/notes.txt"), false},
		{fsReq(boundary.OpReadFile, "/home/u/.bashrc"), false},
		{held("10.0.0.5:5432"), false},
		{held("example.com:443"), false},
	} {
		why, denied := b.BeforeAllow(tc.req)
		if denied != tc.denied || (denied && why == "") {
			t.Errorf("%s %s%s: denied %v (%q), want %v", tc.req.Operation, tc.req.Path, tc.req.DestinationText(), denied, why, tc.denied)
		}
	}
}
