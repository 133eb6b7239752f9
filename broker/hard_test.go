package broker

import (
	"context"
	"testing"

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
		{"secret read", fsReq(grants.OpReadFile, "/home/u/.ssh/id_ed25519")},
		{"secret write", fsReq(grants.OpWriteFile, "/home/u/.aws/credentials")},
		{"own policy", fsReq(grants.OpWriteFile, "/home/u/.config/sandboxd/policy.toml")},
		{"own state", fsReq(grants.OpReadFile, "/home/u/.local/state/sandboxd/breaker/x")},
		{"remove home", fsReq(grants.OpRemoveDir, "/home/u")},
		{"remove root", fsReq(grants.OpRemoveDir, "/")},
		{"git hook", fsReq(grants.OpMakeReg, "/home/u/proj/.git/hooks/pre-commit")},
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
