package policy

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/credstore"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/ruletext"
	"github.com/sandboxd/sandboxd/statedir"
)

// Resolved is a policy with every path made absolute for one run.
type Resolved struct {
	// Profile is "default" or "strict".
	Profile string
	// Isolation is "auto", "namespaces" or "landlock-only".
	Isolation string
	// Writable holds the extra writable roots: absolute, cleaned, symlinks
	// resolved when they exist.
	Writable []string
	// Secrets holds the paths denied for reading: the built-in list minus
	// allow_secrets, plus filesystem.secrets, plus sandboxd's own config
	// and state directories. Absolute and cleaned; for an entry that
	// exists, its symlink-resolved form is listed too when different. An
	// entry whose last element is a glob keeps the glob (only its parent
	// directory is resolved).
	Secrets []string
	// AllowSecrets holds the allow_secrets entries that are not built-in
	// entries, absolute: paths the credential scan finds that the user
	// keeps readable.
	AllowSecrets []string
	// HomeAllow holds the paths under $HOME that stay readable with the
	// strict profile (nil otherwise): absolute, symlink-resolved when they
	// exist.
	HomeAllow []string
	// Protected holds the workspace persistence paths: relative to the
	// workspace, cleaned, never absolute, never containing "..".
	Protected []string
	// BoundaryAllow, BoundaryAsk and BoundaryDeny hold the boundary rules
	// as written ("~" is expanded by the broker's parser).
	BoundaryAllow, BoundaryAsk, BoundaryDeny []string
	// Quiet holds the quiet list: the built-in entries, then the user's,
	// patterns expanded to absolute.
	Quiet []QuietEntry
	// EnvAllow holds the environment patterns kept despite EnvDeny.
	EnvAllow []string
	// EnvDeny holds the environment patterns stripped (built-ins plus
	// env.deny).
	EnvDeny []string
	// Limits holds the resource limits.
	Limits Limits
	// Network holds how the egress proxy decides.
	Network Network
	// Review holds the model reviewer's configuration.
	Review Review
	// NoTransaction holds the command patterns that run without the
	// copy-on-write layer.
	NoTransaction []string
	// Audit is the [audit] table: the caller's own audit log.
	Audit Audit
	// Production holds the production markers, lower case: the built-in
	// ones, then [review] production's.
	Production []string
	// ProductionPlaces are the caller's cloud and cluster configuration
	// places, where the names of a path below say which account or
	// cluster a command acts on.
	ProductionPlaces []ProductionPlace
}

// Dirs are the directories a policy is resolved against.
type Dirs struct {
	// Home is the caller's home directory; "~" expands to it. Required.
	Home string
	// ConfigDir is the user configuration directory, e.g. /root/.config;
	// ConfigDir/sandboxd is always a secret. Defaults to Home/.config.
	ConfigDir string
	// StateDir is the user state directory, e.g. /root/.local/state;
	// StateDir/sandboxd is always a secret. Defaults to Home/.local/state.
	StateDir string
	// Root is true when the caller is uid 0; it adds the root-only secrets.
	Root bool
	// Getenv returns the caller's environment variable ("" when unset):
	// XDG_CONFIG_HOME and the others, and tools' own variables
	// (GNUPGHOME, CARGO_HOME, ...), place credential stores. Nil: the
	// stores at their default places only.
	Getenv func(string) string
}

// Resolve validates p and makes every path absolute for one run. "~" alone
// and "~/..." expand with d.Home; "~user" is an error.
func (p Policy) Resolve(d Dirs) (Resolved, error) {
	return p.resolve(ruleSchema(), d)
}

// Resolve is p.Resolve(d) with the schema c made once.
func (c *Cache) Resolve(p Policy, d Dirs) (Resolved, error) {
	return p.resolve(c.schema, d)
}

// resolve is Resolve with the schema s.
func (p Policy) resolve(s *schema, d Dirs) (Resolved, error) {
	p = p.clone()
	if key, msg := validatePolicy(s, &p); msg != "" {
		return Resolved{}, &Error{Key: key, Msg: msg}
	}
	home, configDir, stateDir, err := d.resolve()
	if err != nil {
		return Resolved{}, err
	}

	r := Resolved{
		Profile:       p.Profile,
		Isolation:     p.Isolation,
		Limits:        p.Limits,
		Network:       p.Network,
		Review:        p.Review,
		NoTransaction: slices.Clone(p.Transaction.NoTransaction),
		Audit:         p.Audit,
	}
	// One look at the tree for the whole resolution: the secrets share
	// a few directories, each read once.
	real := persist.NewRealpaths()
	if r.Writable, err = resolveWritable(p.Filesystem.Writable, home, real); err != nil {
		return Resolved{}, err
	}
	secrets := secretSpecs(p, d, home, configDir, stateDir)
	if r.Secrets, err = resolveSecrets(secrets, home, real); err != nil {
		return Resolved{}, err
	}
	var builtin []string
	if len(p.Filesystem.AllowSecrets) > 0 {
		builtin = DefaultSecrets(true) // a list of hundreds, made only when needed
	}
	for _, a := range p.Filesystem.AllowSecrets {
		if !slices.Contains(builtin, a) {
			x, err := expandKey("filesystem.allow_secrets", a, home)
			if err != nil {
				return Resolved{}, err
			}
			r.AllowSecrets = append(r.AllowSecrets, x)
		}
	}
	if p.Profile == ProfileStrict {
		if r.HomeAllow, err = resolveHomeAllow(p.Filesystem.HomeAllow, home, real); err != nil {
			return Resolved{}, err
		}
	}
	if r.Protected, err = resolveProtected(p.Filesystem.Protected); err != nil {
		return Resolved{}, err
	}

	var envAllow, envDeny orderedSet
	envAllow.add(p.Env.Allow...)
	envDeny.add(DefaultEnvDeny()...)
	envDeny.add(p.Env.Deny...)
	r.EnvAllow, r.EnvDeny = envAllow.list, envDeny.list
	r.BoundaryAllow, r.BoundaryAsk, r.BoundaryDeny = p.Boundaries.Allow, p.Boundaries.Ask, p.Boundaries.Deny
	r.Quiet = resolveQuiet(p.Quiet.Deny, d.Home)
	r.Production, r.ProductionPlaces = resolveProduction(p, d, home, real)
	return r, nil
}

// resolve checks d and returns the cleaned home directory and the config
// and state directories, defaulted under it when unset.
func (d Dirs) resolve() (home, configDir, stateDir string, err error) {
	if d.Home == "" || !filepath.IsAbs(d.Home) {
		return "", "", "", &Error{Msg: fmt.Sprintf("home directory %q is not an absolute path", d.Home)}
	}
	home = filepath.Clean(d.Home)
	configDir, stateDir = d.ConfigDir, d.StateDir
	if configDir == "" {
		configDir = filepath.Join(home, ".config")
	}
	if stateDir == "" {
		stateDir = filepath.Join(home, ".local", "state")
	}
	if !filepath.IsAbs(configDir) || !filepath.IsAbs(stateDir) {
		return "", "", "", &Error{Msg: fmt.Sprintf("config directory %q and state directory %q must be absolute", configDir, stateDir)}
	}
	return home, configDir, stateDir, nil
}

// expandKey is expandHome with the policy key s came from in its error.
func expandKey(key, s, home string) (string, error) {
	x, err := expandHome(s, home)
	if err != nil {
		return "", &Error{Key: key, Msg: err.Error(), cause: err} // expandHome's own sentence about the value
	}
	return x, nil
}

// resolveWritable expands filesystem.writable and resolves the symlinks
// of the entries that exist.
func resolveWritable(specs []string, home string, real *persist.Realpaths) ([]string, error) {
	var writable orderedSet
	for _, s := range specs {
		x, err := expandKey("filesystem.writable", s, home)
		if err != nil {
			return nil, err
		}
		writable.add(realpathOf(real, x))
	}
	return writable.list, nil
}

// secretSpecs lists the secrets as written or absolute, before
// expansion: each credential store at every place the caller's
// environment puts it and at its default, minus those allow_secrets
// names; the root-only entries for root; then filesystem.secrets; then
// sandboxd's own config, state and data directories.
func secretSpecs(p Policy, d Dirs, home, configDir, stateDir string) []string {
	var allowed orderedSet
	allowed.add(p.Filesystem.AllowSecrets...)
	var secrets []string
	dirs := credstore.Dirs{Home: home, Getenv: d.Getenv}
	for _, st := range credstore.Stores() {
		if def := st.Default(); def != "" && allowed.has(def) {
			continue
		}
		secrets = append(secrets, st.Paths(dirs)...)
	}
	if d.Root {
		for _, s := range rootSecrets() {
			if !allowed.has(s) {
				secrets = append(secrets, s)
			}
		}
	}
	secrets = append(secrets, p.Filesystem.Secrets...)
	secrets = append(secrets, ownDirs()...)
	return append(secrets, statedir.For(configDir, stateDir).Own()...)
}

// resolveSecrets expands each secret and lists, after it, its
// symlink-resolved form when different; an entry whose last element is
// a glob keeps the glob and has only its parent directory resolved.
func resolveSecrets(secrets []string, home string, real *persist.Realpaths) ([]string, error) {
	// Each secret and, for some, its resolved form: sized once, not
	// grown a few hundred entries at a time.
	denied := newOrderedSet(2 * len(secrets))
	for _, s := range secrets {
		x, err := expandKey("filesystem.secrets", s, home)
		if err != nil {
			return nil, err
		}
		denied.add(x)
		dir, last := filepath.Split(x)
		if hasGlob(last) {
			if rd := realpathOf(real, filepath.Clean(dir)); rd != filepath.Clean(dir) {
				denied.add(filepath.Join(rd, last))
			}
		} else if rx := realpathOf(real, x); rx != x {
			denied.add(rx)
		}
	}
	return denied.list, nil
}

// resolveHomeAllow expands the built-in home allow list and
// filesystem.home_allow for the strict profile; each must be strictly
// below home.
func resolveHomeAllow(specs []string, home string, real *persist.Realpaths) ([]string, error) {
	var allow orderedSet
	for _, s := range append(DefaultHomeAllow(), specs...) {
		x, err := expandKey("filesystem.home_allow", s, home)
		if err != nil {
			return nil, err
		}
		if !pathtree.Within(home, x) || x == home {
			return nil, &Error{Key: "filesystem.home_allow", Msg: fmt.Sprintf("%q is not below the home directory %q", s, home)}
		}
		allow.add(realpathOf(real, x))
	}
	return allow.list, nil
}

// resolveProtected normalises the built-in persistence paths and
// filesystem.protected, relative to the workspace.
func resolveProtected(specs []string) ([]string, error) {
	all := append(DefaultProtected(), specs...)
	protected := newOrderedSet(len(all))
	for _, s := range all {
		c, msg := normProtected(s)
		if msg != "" {
			return nil, &Error{Key: "filesystem.protected", Msg: msg}
		}
		if c == ".git" {
			continue // git directories, at any depth and name, have rules of their own
		}
		protected.add(c)
	}
	return protected.list, nil
}

// expandHome expands "~" and "~/..." with home and returns a cleaned
// absolute path.
func expandHome(s, home string) (string, error) {
	n, msg := normPathSpec(s)
	if msg != "" {
		return "", fmt.Errorf("%s", msg)
	}
	switch {
	case n == "~":
		n = home
	case strings.HasPrefix(n, "~/"):
		n = filepath.Join(home, n[2:])
	}
	if !filepath.IsAbs(n) {
		return "", fmt.Errorf("%q does not expand to an absolute path", s)
	}
	return filepath.Clean(n), nil
}

// realpathOf returns p with symlinks resolved (by real) when it exists,
// else p.
func realpathOf(real *persist.Realpaths, p string) string {
	if r, err := real.Eval(p); err == nil {
		return r
	}
	return p
}

// orderedSet collects strings in insertion order without duplicates.
type orderedSet struct {
	list []string
	seen map[string]struct{}
}

// newOrderedSet is an empty set with room for n strings.
func newOrderedSet(n int) orderedSet {
	return orderedSet{list: make([]string, 0, n), seen: make(map[string]struct{}, n)}
}

// add appends the items not already in the set.
func (o *orderedSet) add(items ...string) {
	if o.seen == nil {
		o.seen = make(map[string]struct{}, len(items))
	}
	for _, s := range items {
		if _, ok := o.seen[s]; !ok {
			o.seen[s] = struct{}{}
			o.list = append(o.list, s)
		}
	}
}

// has reports whether s is in the set.
func (o *orderedSet) has(s string) bool {
	_, ok := o.seen[s]
	return ok
}

// resolveQuiet expands the built-in and the user's quiet patterns.
func resolveQuiet(user []string, home string) []QuietEntry {
	expand := func(p string) string {
		if p == "~" || strings.HasPrefix(p, "~/") {
			// The home is a name, not a pattern: a wildcard in it is
			// escaped, so the entry stays in this one home.
			return filepath.Join(ruletext.Escape(home), strings.TrimPrefix(p, "~"))
		}
		return p
	}
	var out []QuietEntry
	for _, e := range DefaultQuiet() {
		out = append(out, QuietEntry{Pattern: expand(e.Pattern), Why: e.Why, Tools: e.Tools})
	}
	for _, p := range user {
		out = append(out, QuietEntry{Pattern: expand(p), Why: "your policy's [quiet] list"})
	}
	return out
}
