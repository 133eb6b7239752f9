package session

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/intents"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/ruletext"
)

// A person's intent for a session (docs/ARCHITECTURE.md §1.5, step 7):
// "for this session, yes to this kind of thing". The scope is read with
// the policy's rule grammar (broker.ParseRule), put in its one normal
// form, shown in that form, and the approval binds to that text's hash.
// The page and `sandboxd approve --scope` call these: PreviewIntent to
// show a scope, GrantIntent to issue what was shown, Intents and
// RevokeIntent.

// IntentScope is a scope as the person is shown it before approving.
type IntentScope struct {
	// Text is the scope in its normal form: what the person approves.
	Text string `json:"scope"`
	// Hash is the hex SHA-256 of Text: what the approval binds to.
	Hash string `json:"hash"`
	// Allows says, in sentences, what it could allow.
	Allows []string `json:"allows"`
}

// fsIntentOp says what a filesystem operation a scope names covers, or
// ok is false: only what the sandbox can grant on one object, and the
// classes that hold it.
func fsIntentOp(op string) (what string, ok bool) {
	switch op {
	case "read":
		return "read (read_file)", true
	case "write":
		return "write (write_file, truncate, make_reg: change or create it)", true
	case string(boundary.OpMakeReg):
		return "make_reg (create it)", true
	case string(boundary.OpReadFile), string(boundary.OpExecute), string(boundary.OpWriteFile), string(boundary.OpTruncate):
		return op, true
	}
	return "", false
}

// errScope is a scope refused for its shape; its text is the sentence.
func errScope(why string) error { return publicerr.New("this scope is refused: " + why) }

// ParseIntentScope reads a scope with the policy's rule grammar (home
// expands "~") and returns it in its normal form, or why it is refused
// for its shape alone: a filesystem scope names one exact file, or a
// whole subtree ("DIR/**") for reading or executing, with an operation
// the sandbox can grant; a network scope is `net connect` to one name,
// the names below one (at least two labels: "*.npmjs.org"), or one
// public address. The normal form parses back to the same rule, with
// any home. What the caller's own files make of it (secrets, caches,
// start-up locations, PATH) is PreviewIntent's.
func ParseIntentScope(text, home string) (IntentScope, broker.Rule, error) {
	r, err := broker.ParseRule(text, home)
	if err != nil {
		return IntentScope{}, broker.Rule{}, errScope("it is not a rule sandboxd reads (fs|net OPERATION PATTERN)")
	}
	var norm string
	var allows []string
	if r.Surface == boundary.Network {
		norm, allows, err = netScope(r)
	} else {
		norm, allows, err = fsScope(r)
	}
	if err != nil {
		return IntentScope{}, broker.Rule{}, err
	}
	// The text shown must be read as the rule that was checked, by the
	// broker, with whatever home it has.
	for _, h := range []string{home, "/nonexistent-home"} {
		again, err := broker.ParseRule(norm, h)
		if err != nil || again != r {
			return IntentScope{}, broker.Rule{}, errScope("its normal form would be read differently")
		}
	}
	return IntentScope{Text: norm, Hash: intents.ScopeHash(norm), Allows: allows}, r, nil
}

// fsScope is a filesystem rule's normal form and what it allows.
func fsScope(r broker.Rule) (string, []string, error) {
	what, ok := fsIntentOp(r.Operation)
	if !ok {
		return "", nil, errScope("a filesystem scope names read, write, read_file, execute, write_file, truncate or make_reg: nothing else can be granted")
	}
	if p, ok := ruletext.Literal(r.Target); ok && p != "/" {
		return "fs " + r.Operation + " " + ruletext.Escape(p), []string{
			what + " of the one file " + p + " (under both its names: a symlink elsewhere is not covered)",
			"in this session only, after the deny rules, the hard denies and the ask rules",
		}, nil
	}
	dir, ok := strings.CutSuffix(r.Target, "/**")
	if p, lit := ruletext.Literal(dir); ok && lit && p != "/" {
		if r.Operation != "read" && r.Operation != string(boundary.OpReadFile) && r.Operation != string(boundary.OpExecute) {
			return "", nil, errScope("a subtree is never approved for writing: outside the workspace nothing sweeps what a command leaves there, so name the exact file")
		}
		return "fs " + r.Operation + " " + ruletext.Escape(p) + "/**", []string{
			what + " of every file at any depth below " + p,
			"in this session only, after the deny rules, the hard denies (secrets stay unreadable) and the ask rules",
		}, nil
	}
	return "", nil, errScope("a filesystem scope names one exact file, or a whole subtree as DIR/** (no other wildcard)")
}

// netScope is a network rule's normal form and what it allows.
func netScope(r broker.Rule) (string, []string, error) {
	if r.Operation != string(boundary.OpConnect) {
		return "", nil, errScope("a network scope is net connect")
	}
	p, err := netdest.ParsePattern(r.Target)
	if err != nil {
		return "", nil, errScope("its destination is not one sandboxd reads")
	}
	host, port := hostPort(p.String())
	ports := "on ports 80 and 443"
	switch {
	case port == "*":
		ports = "on any port"
	case port != "":
		ports = "on port " + port
	}
	var what string
	switch {
	case host == "*":
		return "", nil, errScope("a scope of every name is not a kind of thing: name the domain")
	case p.IsAddrPattern():
		a, aerr := netipOf(host)
		if aerr != nil {
			return "", nil, errScope("a network scope names one address, never a range")
		}
		if why := netdest.Special(a); why != "" || len(netdest.MetadataAddr(a)) > 0 {
			return "", nil, errScope("the address is not public (" + why + "), or a cloud metadata endpoint: the hard denies refuse it whatever is approved")
		}
		what = "connections to the address " + host + " " + ports
	case strings.HasPrefix(host, "*."):
		if strings.Count(host, ".") < 2 {
			return "", nil, errScope("a wildcard must leave at least two labels (*.npmjs.org, not *.org)")
		}
		what = "connections to any name below " + host[2:] + " (not " + host[2:] + " itself) " + ports
	default:
		what = "connections to " + host + " " + ports
	}
	if metadataName(p) {
		return "", nil, errScope("it names a cloud metadata endpoint")
	}
	return "net connect " + p.String(), []string{what,
		"each address a name resolves to is still checked: never a metadata endpoint or a non-public address",
		"in this session only, after the deny rules, the hard denies and the ask rules"}, nil
}

// hostPort splits a pattern's normal form (an IPv6 host is bracketed).
func hostPort(s string) (host, port string) {
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// netipOf is the one address a host part names (no range).
func netipOf(host string) (netip.Addr, error) {
	return netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// metadataName reports whether p names a metadata endpoint by name.
func metadataName(p netdest.Pattern) bool {
	for _, ep := range netdest.MetadataEndpoints() {
		if ep.Name == "" {
			continue
		}
		for _, port := range []uint16{80, 443, 8080, 8775} {
			if d, err := netdest.ParseHost(ep.Name, port); err == nil && p.Match(d) {
				return true
			}
		}
	}
	return false
}

// intentPlaces are the caller's places a scope may not name or hold.
type intentPlaces struct {
	secrets, own, caches, path []string
	startup                    *persist.HostGuard
}

// intentPlacesOf reads the caller's policy and files (as the caller):
// the secrets (the policy's and the credential stores found in the
// home), sandboxd's own state, the caches, PATH, the start-up locations.
func (r *Runner) intentPlacesOf(ctx context.Context, c Caller) (intentPlaces, error) {
	pol, err := r.policies.Load(c.UID, r.machine, c.Layout().Policy(), false)
	if err != nil {
		return intentPlaces{}, policyUnusable(err)
	}
	res, err := r.policies.Resolve(pol, policy.Dirs{Home: c.Home, ConfigDir: c.ConfigHome, StateDir: c.StateHome, Root: c.UID == 0, Getenv: c.Getenv})
	if err != nil {
		return intentPlaces{}, policyUnusable(err)
	}
	found, _, err := r.foundStores(ctx, c, &plan{policy: res})
	if err != nil {
		return intentPlaces{}, publicerr.Wrap(err, "the credential stores in your home could not be scanned")
	}
	pl := intentPlaces{secrets: append(res.Secrets, found...),
		own:  append(append(c.Layout().Own(), filepath.Join(c.Home, ".local", "share", "sandboxd")), r.hidden...),
		path: filepath.SplitList(c.Getenv("PATH")), caches: intentCaches(c)}
	pl.startup = persist.NewHostGuard(persist.HostConfig{Home: c.Home, ConfigHome: c.ConfigHome, DataHome: c.DataHome,
		Path: pl.path, GitConfigs: c.GitConfigs, Names: r.builtinNames})
	return pl, nil
}

// intentCaches are the caches a command could poison for the host: the
// XDG cache, each tool cache the caller's environment names, the stores
// and registries tools run code from, and sandboxd's private caches.
func intentCaches(c Caller) []string {
	out := []string{c.Layout().Caches()}
	if x, _ := userCacheDir(lookup(c.Env), c.Home); x != "" {
		out = append(out, x)
	}
	for _, tc := range toolCaches(c.Env, c.Home) {
		if tc.host != "" {
			out = append(out, tc.host)
		}
	}
	for _, rel := range []string{".cache", ".npm", ".local/share/pnpm", ".cargo/registry", ".cargo/git", ".m2/repository",
		".gradle/caches", ".ivy2", ".nuget/packages", "go/pkg/mod"} {
		out = append(out, filepath.Join(c.Home, rel))
	}
	return out
}

// refuse says why the caller's places refuse a filesystem scope, or "".
// p is the file, or the subtree's directory when subtree is set.
func (pl intentPlaces) refuse(p string, subtree bool) string {
	overlap := func(dir string) bool {
		return pathtree.Within(dir, p) || (subtree && pathtree.Within(p, dir))
	}
	for _, s := range pl.secrets {
		if broker.Within(p, s) || (subtree && pathtree.Within(p, literalDir(s))) {
			return "it names a secret or a subtree holding one"
		}
	}
	for _, o := range pl.own {
		if overlap(o) {
			return "it names sandboxd's own configuration or state"
		}
	}
	for _, cd := range pl.caches {
		if overlap(cd) {
			return "it names a cache, which holds what the host runs later"
		}
	}
	for _, d := range pl.path {
		if filepath.IsAbs(d) && overlap(filepath.Clean(d)) {
			return "it names a directory on your PATH"
		}
	}
	if why, ok := pl.startup.Startup(p); ok {
		return "it names a start-up location (" + why + ")"
	}
	return ""
}

// literalDir is a secrets entry without a glob in its last element.
func literalDir(s string) string {
	s = filepath.Clean(s)
	if strings.ContainsAny(filepath.Base(s), "*?[") {
		return filepath.Dir(s)
	}
	return s
}

// PreviewIntent reads a scope for c and says what it could allow, or why
// it is refused: its shape (ParseIntentScope), or c's own places.
func (r *Runner) PreviewIntent(ctx context.Context, c Caller, text string) (IntentScope, error) {
	sc, rule, err := ParseIntentScope(text, c.Home)
	if err != nil || rule.Surface != boundary.Filesystem {
		return sc, err
	}
	var pl intentPlaces
	if err := fsid.Do(c.ID(), func() (err error) { pl, err = r.intentPlacesOf(ctx, c); return err }); err != nil {
		return IntentScope{}, err
	}
	dir, subtree := strings.CutSuffix(rule.Target, "/**")
	p, _ := ruletext.Literal(dir)
	if why := pl.refuse(p, subtree); why != "" {
		return IntentScope{}, errScope(why)
	}
	return sc, nil
}

// intentStore is c's intents, read and written as c.
func intentStore(c Caller) *intents.Store {
	return intents.New(c.Layout().Intents(), intents.WithActor(func(f func() error) error { return fsid.Do(c.ID(), f) }))
}

// ErrNotShown is an approval of a text that is not a scope's normal
// form, or of a hash that is not its text's.
var ErrNotShown = publicerr.New("the approval is not for the scope as it is shown, so nothing is issued")

// GrantIntent issues an intent of c's session name for shown, the scope
// text the person was shown (PreviewIntent's Text) and hash, what they
// approved; it lasts ttl (0: intents.DefaultTTL). The scope is checked
// again; a text that is not its own normal form, or a hash of another
// text, is ErrNotShown. record is called before the intent exists (the
// audit log): an error from it issues nothing.
func (r *Runner) GrantIntent(ctx context.Context, c Caller, name, shown, hash string, ttl time.Duration, by string, record func(intents.Intent) error) (intents.Intent, error) {
	if name == "" {
		return intents.Intent{}, publicerr.New("name a session")
	}
	sc, err := r.PreviewIntent(ctx, c, shown)
	if err != nil {
		return intents.Intent{}, err
	}
	if sc.Text != shown || sc.Hash != hash {
		return intents.Intent{}, ErrNotShown
	}
	in, err := intentStore(c).Add(ctx, Scoped(c, name), sc.Text, hash, ttl, by, record)
	return in, intentErr(err)
}

// Intents lists c's session name's live intents, oldest first.
func (r *Runner) Intents(ctx context.Context, c Caller, name string) ([]intents.Intent, error) {
	ins, err := intentStore(c).List(ctx, Scoped(c, name))
	return ins, intentErr(err)
}

// RevokeIntent revokes c's intent id in session name; record is called
// once it is gone (the audit log).
func (r *Runner) RevokeIntent(ctx context.Context, c Caller, name, id string, record func(intents.Intent) error) (intents.Intent, error) {
	in, err := intentStore(c).Revoke(ctx, Scoped(c, name), id, record)
	return in, intentErr(err)
}

// intentErr is err with a sentence to show.
func intentErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, intents.ErrHash):
		return publicerr.Wrap(err, "the approval is not for the scope as it is shown, so nothing is issued")
	case errors.Is(err, intents.ErrTTL):
		return publicerr.Wrap(err, "an intent lasts at most 24 hours")
	case errors.Is(err, intents.ErrFull):
		return publicerr.Wrap(err, "the session holds too many intents: revoke one first")
	case errors.Is(err, intents.ErrUnknown):
		return publicerr.Wrap(err, "the session has no such intent (it may have expired)")
	case errors.Is(err, intents.ErrCorrupt):
		return publicerr.Wrap(err, "the session's intents are damaged, and none is used or issued")
	}
	return publicerr.Wrap(err, "the session's intents cannot be read or written here")
}

// brokerIntents is the broker's view of a caller's intents; home is the
// caller's, which a scope's "~" names.
type brokerIntents struct {
	s    *intents.Store
	home string
}

// Intents returns session's live intents whose scope is one a person
// could have been shown: its own normal form, of a shape ParseIntentScope
// takes. The file is the caller's own, and its hash binds a text only to
// itself, so a process of theirs could write any rule there ("fs write
// ~/**", "net connect *:*"); such a scope covers nothing.
func (b brokerIntents) Intents(ctx context.Context, session string) ([]broker.Intent, error) {
	ins, err := b.s.List(ctx, session)
	out := make([]broker.Intent, 0, len(ins))
	for _, in := range ins {
		if sc, _, perr := ParseIntentScope(in.Scope, b.home); perr != nil || sc.Text != in.Scope {
			continue
		}
		out = append(out, broker.Intent{ID: in.ID, Scope: in.Scope, Hash: in.Hash, ExpiresAt: in.ExpiresAt})
	}
	return out, err
}
