package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// name is the directory sandboxd keeps in each XDG home.
const name = "sandboxd"

// Layout is where sandboxd keeps what it keeps for one caller.
type Layout struct {
	// Config is sandboxd's configuration directory (CONFIG).
	Config string
	// State is sandboxd's state directory (STATE).
	State string
}

// For is the layout under the caller's configuration and state homes
// (XDG_CONFIG_HOME and XDG_STATE_HOME, or their defaults).
func For(configHome, stateHome string) Layout {
	return Layout{Config: filepath.Join(configHome, name), State: filepath.Join(stateHome, name)}
}

// Own lists both directories: what no command may read or write.
func (l Layout) Own() []string { return []string{l.Config, l.State} }

// Policy is the caller's own policy file.
func (l Layout) Policy() string { return filepath.Join(l.Config, "policy.toml") }

// Caches is the directory holding every workspace's private caches, one
// directory each (package cachedir).
func (l Layout) Caches() string { return filepath.Join(l.State, "cache") }

// Cache is the private caches' directory of workspace (an absolute,
// clean path): below Caches, named by a digest of the path.
func (l Layout) Cache(workspace string) string {
	sum := sha256.Sum256([]byte(workspace))
	return filepath.Join(l.Caches(), hex.EncodeToString(sum[:8]))
}

// Breaker is the circuit breaker's directory (broker.NewBreaker).
func (l Layout) Breaker() string { return filepath.Join(l.State, "breaker") }

// Overrides is the directory of a person's overrides (overrides.New).
func (l Layout) Overrides() string { return filepath.Join(l.State, "overrides") }

// Intents is the directory of a person's session intents (intents.New).
func (l Layout) Intents() string { return filepath.Join(l.State, "intents") }

// Audit is the directory of the caller's own audit log (package audit:
// the embedded runs' log, its rotated files, its public key).
func (l Layout) Audit() string { return filepath.Join(l.State, "audit") }

// AuditKey is the private key that signs the caller's audit log's
// checkpoints: apart from the log, so a copy of the log's directory
// never carries it.
func (l Layout) AuditKey() string { return filepath.Join(l.State, "audit-signing.key") }

// CredIndex is the credential scan's index (credstore.ScanConfig.Index).
func (l Layout) CredIndex() string { return filepath.Join(l.State, "credstores.index") }

// AgentSession is where an agent's hook leaves what sandboxd run needs
// to know of one of the agent's sessions (the request the person last
// typed, for --intent-file; the project directory). The session id is
// the agent's: it names the directory only through a hash.
func (l Layout) AgentSession(agent, session string) string {
	sum := sha256.Sum256([]byte(session))
	return filepath.Join(l.State, "agents", agent, hex.EncodeToString(sum[:12]))
}

// Install is the record of what `sandboxd hook install` changed in an
// agent's configuration, which uninstall reverts.
func (l Layout) Install(agent string) string {
	return filepath.Join(l.State, "installs", agent+".json")
}

// Bin holds the links sandboxd answers to by name (an agent's shell
// prefix that must be a single program).
func (l Layout) Bin() string { return filepath.Join(l.State, "bin") }
