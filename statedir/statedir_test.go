package statedir

import (
	"strings"
	"testing"
)

// TestLayout pins the names on disk: a caller's state from an earlier
// version must still be found (a breaker's count, a person's override).
func TestLayout(t *testing.T) {
	l := For("/h/.config", "/h/.local/state")
	for _, c := range [][2]string{
		{l.Config, "/h/.config/sandboxd"},
		{l.State, "/h/.local/state/sandboxd"},
		{l.Policy(), "/h/.config/sandboxd/policy.toml"},
		{l.Caches(), "/h/.local/state/sandboxd/cache"},
		{l.Cache("/home/u/project"), "/h/.local/state/sandboxd/cache/4eb6cd28fb98b739"},
		{l.Breaker(), "/h/.local/state/sandboxd/breaker"},
		{l.Overrides(), "/h/.local/state/sandboxd/overrides"},
		{l.Audit(), "/h/.local/state/sandboxd/audit"},
		{l.AuditKey(), "/h/.local/state/sandboxd/audit-signing.key"},
		{l.CredIndex(), "/h/.local/state/sandboxd/credstores.index"},
		{l.AgentSession("codex", "01a2"), "/h/.local/state/sandboxd/agents/codex/bd79617c700d641708da34f6"},
		{l.Bin(), "/h/.local/state/sandboxd/bin"},
		{l.Install("claude-code"), "/h/.local/state/sandboxd/installs/claude-code.json"},
		{strings.Join(l.Own(), " "), "/h/.config/sandboxd /h/.local/state/sandboxd"},
	} {
		if got, want := c[0], c[1]; got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
}
