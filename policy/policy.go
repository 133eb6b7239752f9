package policy

import (
	"time"

	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/persist"
)

// Profile values.
const (
	// ProfileDefault denies the built-in and configured secrets and leaves
	// the rest of $HOME readable.
	ProfileDefault = "default"
	// ProfileStrict denies all of $HOME except the home allow list.
	ProfileStrict = "strict"
)

// Isolation values.
const (
	// IsolationAuto uses namespaces when available, else Landlock only.
	IsolationAuto = "auto"
	// IsolationNamespaces requires namespaces.
	IsolationNamespaces = "namespaces"
	// IsolationLandlockOnly uses Landlock and seccomp without namespaces.
	IsolationLandlockOnly = "landlock-only"
)

// Minimum values accepted for the limits.
const (
	// MinPids is the smallest accepted limits.pids.
	MinPids = 16
	// MinMemory is the smallest accepted limits.memory.
	MinMemory Size = 16 * MiB
	// MinFileSize is the smallest accepted limits.file_size.
	MinFileSize Size = 1 * MiB
	// MinTmpSize is the smallest accepted limits.tmp_size.
	MinTmpSize Size = 1 * MiB
	// MinLayerSize is the smallest accepted limits.layer_size.
	MinLayerSize Size = 1 * MiB
	// MinCacheSize is the smallest accepted limits.cache_size.
	MinCacheSize Size = 16 * MiB
)

// Policy is the content of a policy file. The `toml` tag names the key; the
// `tighten` tag names the rule used when a workspace-local policy is merged
// into the user policy (see Tighten). Every leaf field must carry a known
// `tighten` tag.
type Policy struct {
	// Profile is "default" or "strict".
	Profile string `toml:"profile" tighten:"profile"`
	// Isolation is "auto", "namespaces" or "landlock-only".
	Isolation string `toml:"isolation" tighten:"isolation"`
	// Filesystem holds the [filesystem] table.
	Filesystem Filesystem `toml:"filesystem"`
	// Env holds the [env] table.
	Env Env `toml:"env"`
	// Limits holds the [limits] table.
	Limits Limits `toml:"limits"`
	// Boundaries holds the [boundaries] table.
	Boundaries Boundaries `toml:"boundaries"`
	// Quiet holds the [quiet] table.
	Quiet Quiet `toml:"quiet"`
	// Network holds the [network] table.
	Network Network `toml:"network"`
	// Review holds the [review] table.
	Review Review `toml:"review"`
	// Transaction holds the [transaction] table.
	Transaction Transaction `toml:"transaction"`
	// Audit holds the [audit] table.
	Audit Audit `toml:"audit"`
}

// Audit is the [audit] table: how the caller's own audit log (the log
// embedded runs write in the state directory) rotates and what it keeps.
// Only the user's own policy may set it: a workspace has no say in what
// its user keeps. The daemon's log is the operator's (sandboxd serve
// --audit-rotate-mb, --audit-retain-days, --audit-retain-mb).
type Audit struct {
	// RotateSize starts a new file of the log past this size.
	RotateSize Size `toml:"rotate_size" tighten:"user"`
	// RetainAge removes rotated files older than this (0: keep them);
	// the log first records which it removes, so a verifier tells them
	// from files that went missing.
	RetainAge Duration `toml:"retain_age" tighten:"user"`
	// RetainSize removes the oldest rotated files past this size in all
	// (0: keep them).
	RetainSize Size `toml:"retain_size" tighten:"user"`
}

// Transaction is the [transaction] table: how a command's workspace
// writes land.
type Transaction struct {
	// NoTransaction lists command patterns that run as with
	// --no-transaction (writes straight to the workspace): watchers and
	// dev servers whose output other tools must see while they run. A
	// pattern matches the whole command string; "*" stands for any run
	// of characters, spaces and slashes included. Only the user's own
	// policy may set it: a workspace must not choose to skip the layer.
	NoTransaction []string `toml:"no_transaction" tighten:"user"`
}

// Structured output modes of the model reviewer.
const (
	StructuredAuto       = "auto"
	StructuredJSONSchema = "json_schema"
	StructuredJSONObject = "json_object"
)

// Review is the [review] table: the model reviewer, reached through an
// OpenAI-compatible Chat Completions endpoint. It is configured when a
// model is named (here or in SANDBOXD_MODEL): an API key in the
// environment alone never sends anything out. Only the user's policy may
// choose the model, endpoint or key variable, or change what the
// reviewer is shown; a workspace may only turn it off, lower its
// timeout and caps, or add production markers.
type Review struct {
	// Enabled turns the model reviewer off when false.
	Enabled bool `toml:"enabled" tighten:"off"`
	// BaseURL is the endpoint ("": OPENAI_BASE_URL, else OpenAI's).
	BaseURL string `toml:"base_url" tighten:"user"`
	// Model is the model's name ("": SANDBOXD_MODEL).
	Model string `toml:"model" tighten:"user"`
	// APIKeyEnv names the environment variable holding the key (never
	// the key itself; "": OPENAI_API_KEY). It is always stripped from
	// the command's environment.
	APIKeyEnv string `toml:"api_key_env" tighten:"user"`
	// Timeout bounds one review, every retry included.
	Timeout Duration `toml:"timeout" tighten:"min"`
	// MaxOutputTokens bounds the model's answer.
	MaxOutputTokens int64 `toml:"max_output_tokens" tighten:"user"`
	// ReasoningEffort is "", "low", "medium" or "high".
	ReasoningEffort string `toml:"reasoning_effort" tighten:"user"`
	// MaxInputTokens bounds the prompt (2048-32768).
	MaxInputTokens int64 `toml:"max_input_tokens" tighten:"user"`
	// StructuredOutput is "auto", "json_schema" or "json_object".
	StructuredOutput string `toml:"structured_output" tighten:"user"`
	// Caps on model calls and tokens: each session's over its life and
	// over the last hour, and the user's over the last hour with every
	// session together (a ceiling, so that many sessions, each within its
	// own caps, still cannot spend without bound). Past one, review falls
	// to a person if one is reachable, else deny, saying which cap it was.
	MaxCallsPerSession   int64 `toml:"max_calls_per_session" tighten:"min"`
	MaxCallsPerHour      int64 `toml:"max_calls_per_hour" tighten:"min"`
	MaxTokensPerSession  int64 `toml:"max_tokens_per_session" tighten:"min"`
	MaxTokensPerHour     int64 `toml:"max_tokens_per_hour" tighten:"min"`
	MaxUserCallsPerHour  int64 `toml:"max_user_calls_per_hour" tighten:"min"`
	MaxUserTokensPerHour int64 `toml:"max_user_tokens_per_hour" tighten:"min"`
	// Production adds production markers to the built-in ones
	// (DefaultProduction): case-insensitive globs over one name. A
	// boundary whose target a marker names (a host's label, a name below
	// the caller's cloud or cluster configuration) is critical before
	// the model is asked: only a person may allow it. Every policy may
	// add (the operator's, the user's, a workspace's); none removes.
	Production []string `toml:"production" tighten:"union"`
}

// Grant scopes of network decisions.
const (
	// ScopeRun: one decision per destination covers every connection to
	// it for the rest of the run.
	ScopeRun = "run"
	// ScopeConnection: every connection is its own decision.
	ScopeConnection = "connection"
)

// Network is the [network] table: how the egress proxy decides. Which
// destinations are allowed, asked or denied is [boundaries] ("net
// connect HOST:PORT").
type Network struct {
	// GrantScope is "run" or "connection"; a workspace may only move it
	// to "connection".
	GrantScope string `toml:"grant_scope" tighten:"scope"`
	// HoldTimeout bounds how long a connection waits for a person's
	// decision, e.g. "300s".
	HoldTimeout Duration `toml:"hold_timeout" tighten:"min"`
	// MaxConnections bounds the proxy's open client connections per run
	// (every way in together: the proxy, SOCKS5, capture).
	MaxConnections int64 `toml:"max_connections" tighten:"min"`
	// MaxDestinations bounds the distinct destinations one run may ask
	// about; beyond it a new one is refused without a decision.
	MaxDestinations int64 `toml:"max_destinations" tighten:"min"`
	// Resolver is "" (the host's resolver, /etc/hosts included) or the
	// IP:PORT of a DNS server the proxy asks instead. Only the user's
	// own policy may set it.
	Resolver string `toml:"resolver" tighten:"user"`
	// Capture sends connects straight to an address (tools that ignore
	// the proxy variables) through the proxy's decision, with a stub
	// resolver inside the run. When false such connects are refused and
	// reported. A workspace may only turn it off.
	Capture bool `toml:"capture" tighten:"off"`
}

// Quiet is the [quiet] table: writes a tool makes to its own state that
// no one wants reviewed, denied quietly (not reviewed, not counted by the
// circuit breaker, counted in the report's "quiet" list). Only the
// user's own policy may extend the built-in list (DefaultQuiet); a
// workspace file may not touch it. Secrets, persistence paths and
// sandboxd's own state are never quiet (the broker's hard denies come
// first), and reads never are.
type Quiet struct {
	// Deny lists path patterns ("~/..." or absolute; "*" within one
	// element, "**" across any number) whose writes are denied quietly.
	Deny []string `toml:"deny" tighten:"user"`
}

// QuietEntry is one pattern of the quiet list and why it is there.
type QuietEntry struct {
	Pattern string // "~/..." or absolute, as written
	Why     string
	// Tools are the programs whose state it is (executable base names,
	// or globs over the executable's path): a missing parent directory
	// of Pattern that only they try to create is quiet too (broker's
	// QuietRule). Entries from a policy file have none.
	Tools []string
}

// DefaultQuiet is the built-in quiet list: state tools keep for
// themselves and carry on without (documented in the README). Histories
// that are also credential stores (~/.bash_history, less's history
// wherever it is, ...) are not here: a secret is never quiet
// (TestQuietNeverSecret).
func DefaultQuiet() []QuietEntry {
	return []QuietEntry{
		{"~/.config/go/telemetry/**", "Go's telemetry counters (go, gopls)", []string{"go", "gopls", "pkg/tool/*_*/*"}},
		{"~/.config/procps/**", "top's configuration (toprc)", []string{"top"}},
		{"~/.toprc", "top's configuration", nil},
		{"~/.node_repl_history", "the Node.js REPL's history", nil},
		{"~/.sqlite_history", "sqlite3's history", nil},
		{"~/.wget-hsts", "wget's HSTS cache", nil},
		{"~/.config/configstore/update-notifier-*", "npm's update notifier", nil},
	}
}

// Boundaries is the [boundaries] table: rules the broker applies to
// boundary requests before any reviewer, "SURFACE OPERATION PATTERN" each:
// "fs write_file /etc/hosts", "fs read ~/datasets/**", "net connect
// *.pypi.org:443". deny beats ask beats allow.
type Boundaries struct {
	// Allow lists requests granted without review.
	Allow []string `toml:"allow" tighten:"subset"`
	// Ask lists requests that always go to the reviewer, even if allowed.
	Ask []string `toml:"ask" tighten:"union"`
	// Deny lists requests refused without review.
	Deny []string `toml:"deny" tighten:"union"`
}

// Filesystem is the [filesystem] table.
type Filesystem struct {
	// Writable lists extra writable roots: absolute paths or "~/...".
	Writable []string `toml:"writable" tighten:"subset"`
	// Secrets lists extra paths denied for reading: absolute or "~/...";
	// the last path element may be a glob.
	Secrets []string `toml:"secrets" tighten:"union"`
	// AllowSecrets lists built-in secret entries to drop, spelled exactly as
	// in DefaultSecrets, or single paths the credential scan finds that
	// stay readable.
	AllowSecrets []string `toml:"allow_secrets" tighten:"subset"`
	// HomeAllow lists extra paths under $HOME that stay readable with the
	// strict profile ("~/..." or absolute under $HOME).
	HomeAllow []string `toml:"home_allow" tighten:"subset"`
	// Protected lists extra persistence paths relative to the workspace.
	Protected []string `toml:"protected" tighten:"union"`
}

// Env is the [env] table.
type Env struct {
	// Allow lists names or patterns kept despite the deny list.
	Allow []string `toml:"allow" tighten:"subset"`
	// Deny lists extra names or patterns stripped from the environment.
	Deny []string `toml:"deny" tighten:"union"`
}

// Limits is the [limits] table.
type Limits struct {
	// Pids is the maximum number of tasks (processes and threads).
	Pids int64 `toml:"pids" tighten:"min"`
	// Memory is the memory limit.
	Memory Size `toml:"memory" tighten:"min"`
	// FileSize is the maximum size of any file written (RLIMIT_FSIZE).
	FileSize Size `toml:"file_size" tighten:"min"`
	// TmpSize is the size of the private /tmp tmpfs.
	TmpSize Size `toml:"tmp_size" tighten:"min"`
	// LayerSize bounds the copy-on-write layer that holds an attempt's
	// workspace writes until commit (memory-backed, charged to the run's
	// memory limit); a write beyond it fails with ENOSPC inside.
	LayerSize Size `toml:"layer_size" tighten:"min"`
	// CacheSize bounds the private tool caches of every workspace
	// together, on the disk: after a run, the least recently used
	// workspaces' caches are removed until they fit. The user's policy
	// only: a workspace's could have everyone else's removed.
	CacheSize Size `toml:"cache_size" tighten:"user"`
}

// Default returns the built-in policy: profile "default", isolation "auto",
// limits pids 4096, memory 8GiB, file_size 16GiB, tmp_size 1GiB,
// layer_size 4GiB, cache_size 20GiB, and empty
// (nil) lists.
func Default() Policy {
	return Policy{
		Profile:   ProfileDefault,
		Isolation: IsolationAuto,
		Limits: Limits{
			Pids:      4096,
			Memory:    8 * GiB,
			FileSize:  16 * GiB,
			TmpSize:   1 * GiB,
			LayerSize: 4 * GiB,
			CacheSize: 20 * GiB,
		},
		Network: Network{GrantScope: ScopeRun, HoldTimeout: Duration(300 * time.Second), MaxConnections: 2048, MaxDestinations: 4096, Capture: true},
		// A session may spend its whole cap within an hour, as it could
		// before the hourly caps were per session (one `review eval` of the
		// shipped corpus does); the user's ceiling is the hourly cap every
		// session shared then.
		Audit: Audit{RotateSize: 64 * MiB},
		Review: Review{Enabled: true, Timeout: Duration(30 * time.Second), MaxOutputTokens: 512,
			MaxInputTokens: 8192, StructuredOutput: StructuredAuto,
			MaxCallsPerSession: 200, MaxCallsPerHour: 200, MaxTokensPerSession: 2_000_000, MaxTokensPerHour: 2_000_000,
			MaxUserCallsPerHour: 600, MaxUserTokensPerHour: 4_000_000},
	}
}

// DefaultSecrets returns the built-in secret entries as allow_secrets
// names them: each documented credential store (credstore.Stores) at its
// default place ("~/.config/gh" stands for $XDG_CONFIG_HOME/gh wherever
// the caller's variable puts it too), sandboxd's own configuration and
// state, and, with root=true, the entries that only matter when the
// caller is uid 0. Stores only a tool's variable places (GNUPGHOME,
// KUBECONFIG, ...) are always denied where it points and have no entry
// here. The result is a fresh slice.
func DefaultSecrets(root bool) []string {
	var s orderedSet
	for _, st := range credstore.Stores() {
		if d := st.Default(); d != "" {
			s.add(d)
		}
	}
	s.add(ownDirs()...)
	if root {
		s.add(rootSecrets()...)
	}
	return s.list
}

// rootSecrets are the system's credential stores, which only root can
// read anyway.
func rootSecrets() []string {
	return []string{
		"/etc/shadow",
		"/etc/shadow-",
		"/etc/gshadow",
		"/etc/gshadow-",
		"/etc/ssh/ssh_host_*_key",
		"/etc/ssl/private",
		"/etc/sudoers",
		"/etc/sudoers.d",
		"/etc/wireguard",                         // wg-quick(8): interface private keys
		"/etc/NetworkManager/system-connections", // nm-settings-keyfile(5): Wi-Fi and VPN secrets
		"/var/lib/tailscale",                     // tailscaled's node key
		"/etc/rancher/k3s/k3s.yaml",              // k3s's cluster-admin kubeconfig
		"/etc/sandboxd",
		"/var/lib/sandboxd",
	}
}

// ownDirs are sandboxd's own configuration, state and data directories
// where XDG puts them by default (a caller's XDG variables may move them:
// then both places are denied).
func ownDirs() []string {
	return []string{"~/.config/sandboxd", "~/.local/state/sandboxd", "~/.local/share/sandboxd"}
}

// selfSecrets returns the built-in secret entries that protect sandboxd's
// own configuration and state; allow_secrets may not drop them.
func selfSecrets() []string {
	return append(ownDirs(), "/etc/sandboxd", "/var/lib/sandboxd")
}

// DefaultHomeAllow returns the strict profile's built-in list of paths under
// $HOME that stay readable. The result is a fresh slice.
func DefaultHomeAllow() []string {
	return []string{
		"~/.gitconfig",
		"~/.config/git",
		"~/go",
		"~/.cargo",
		"~/.rustup",
		"~/.local/bin",
		"~/.local/lib",
		"~/.pyenv",
		"~/.nvm",
		"~/.npm-global",
		"~/.bun",
		"~/.deno",
		"~/.sdkman",
		"~/.gradle/wrapper",
		"~/.m2/repository",
	}
}

// DefaultEnvDeny returns the built-in environment deny patterns (see
// FilterEnv for the pattern syntax). The result is a fresh slice.
func DefaultEnvDeny() []string {
	return []string{
		"*_TOKEN",
		"*_TOKEN_*",
		"*TOKEN",
		"*_KEY",
		"*_KEY_*",
		"*APIKEY*",
		"*API_KEY*",
		"*SECRET*",
		"*PASSWORD*",
		"*PASSWD*",
		"*CREDENTIAL*",
		"*_AUTH",
		"*_AUTH_*",
		"AWS_*",
		"AZURE_*",
		"GOOGLE_APPLICATION_CREDENTIALS",
		"GCLOUD_*",
		"CLOUDSDK_*",
		"OPENAI_*",
		"ANTHROPIC_*",
		"GEMINI_*",
		"MISTRAL_*",
		"GROQ_*",
		"HF_*",
		"HUGGING_FACE_*",
		"GITHUB_TOKEN",
		"GH_*",
		"GITLAB_*",
		"NPM_TOKEN",
		"NODE_AUTH_TOKEN",
		"PYPI_*",
		"TWINE_*",
		"DOCKER_*",
		"KUBECONFIG",
		"VAULT_*",
		"SSH_AUTH_SOCK",
		"SSH_AGENT_PID",
		"GPG_AGENT_INFO",
		"DBUS_*",
		"XDG_RUNTIME_DIR",
		"DISPLAY",
		"WAYLAND_DISPLAY",
		"XAUTHORITY",
		"SANDBOXD_*",
	}
}

// DefaultProtected returns the built-in persistence name patterns
// (package persist owns them and says which tool runs each, and when).
// They apply at every depth; a workspace may add its own and never remove
// these. The result is a fresh slice.
func DefaultProtected() []string {
	var out []string
	for _, n := range persist.Builtin() {
		if n.Kind == persist.Protect {
			out = append(out, n.Pattern)
		}
	}
	return out
}
