package session

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/credfile"
	"github.com/sandboxd/sandboxd/envlist"
	"github.com/sandboxd/sandboxd/fsid"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/overrides"
	"github.com/sandboxd/sandboxd/pathtree"
	"github.com/sandboxd/sandboxd/persist"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/sandbox"
	"golang.org/x/sys/unix"
)

// workspaceFile is the workspace-local policy, which may only tighten.
const workspaceFile = ".sandboxd.toml"

// plan is everything one run decided before its first attempt.
type plan struct {
	ws, cwd string
	// audit records the run's decisions and grant events.
	audit *runAudit
	// wsFrom says how ws was chosen; wsNote why a root found above the
	// working directory was not taken.
	wsFrom, wsNote string
	// storesNote says which part of the home the credential scan did
	// not reach ("" when it reached all).
	storesNote string
	// directBy is the policy's no_transaction pattern the command
	// matched ("" when none did).
	directBy string
	// hidden are the Runner's Hidden paths.
	hidden []string
	policy policy.Resolved
	spec   sandbox.Spec
	broker *broker.Broker
	// session is the request's session, scoped by the caller's uid.
	session string
	command string
	// egress is the proxy's port and credential (zero without egress).
	egress egressPlan
	// reviewer says who reviews the run's boundaries; model is the model
	// reviewer, if any.
	reviewer ReviewerInfo
	model    broker.Reviewer
}

// newPlan resolves the workspace and the policy and builds the sandbox
// spec and the broker. Every error carries a public sentence. It reads
// as the caller (package fsid): the workspace, the policies, the
// writable roots and the home are what the kernel lets the caller see.
func (r *Runner) newPlan(ctx context.Context, c Caller, j Job) (p *plan, err error) {
	aerr := fsid.Do(c.ID(), func() error {
		p, err = r.newPlanAsCaller(ctx, c, j)
		return nil
	})
	if aerr != nil {
		r.log.Warn("cannot act as the caller", "uid", c.UID, "err", aerr)
		return nil, publicerr.Wrap(aerr, fmt.Sprintf("sandboxd cannot act as uid %d here", c.UID))
	}
	return p, err
}

// newPlanAsCaller is newPlan on a thread with the caller's identity.
func (r *Runner) newPlanAsCaller(ctx context.Context, c Caller, j Job) (*plan, error) {
	t0 := time.Now()
	mark := func(what string) { sandbox.LogPhase(r.log, "plan", what, t0) }
	w, err := resolveWorkspace(j.Workspace, c)
	if err != nil {
		return nil, err
	}
	mark("workspace")
	if j.Workspace != "" {
		w.above = append(w.above, j.Above...)
	}
	if j.RequireCwd {
		if real, err := filepath.EvalSymlinks(c.Cwd); err != nil || real != w.cwd || !isDir(real) {
			return nil, publicerr.New(fmt.Sprintf("the working directory %s is not a directory inside the workspace %s", c.Cwd, w.root))
		}
	}
	p := &plan{ws: w.root, cwd: w.cwd, wsFrom: w.from, wsNote: w.note, command: j.commandString(), session: scopedSession(c, j.Session),
		hidden: r.hidden}
	userPolicy, explicit := j.Policy, j.Policy != ""
	if !explicit {
		userPolicy = c.Layout().Policy()
	}
	pol, err := r.policies.Load(c.UID, r.machine, userPolicy, explicit, w.policies()...)
	if err != nil {
		return p, policyUnusable(err)
	}
	p.policy, err = r.policies.Resolve(pol, policy.Dirs{Home: c.Home, ConfigDir: c.ConfigHome, StateDir: c.StateHome, Root: c.UID == 0, Getenv: c.Getenv})
	if err != nil {
		return p, policyUnusable(err)
	}
	mark("policy")
	if j.RequireIsolation {
		if p.policy.Isolation == string(sandbox.LandlockOnly) {
			return p, publicerr.New(`--require-isolation conflicts with the policy's isolation = "landlock-only"`)
		}
		p.policy.Isolation = string(sandbox.Namespaces)
	}
	if p.policy.Isolation != string(sandbox.LandlockOnly) {
		p.egress = newEgressPlan()
	}
	if r.prepare != nil {
		// What the helper's launch depends on is known now: the rest of
		// the plan runs while it starts.
		r.prepare(launchSpec(c, p), p.egress.port != 0 && p.policy.Network.Capture)
	}
	found, note, err := r.foundStores(ctx, c, p)
	if err != nil {
		return p, publicerr.Wrap(err, "the credential stores in your home could not be scanned (run with -v to log why)")
	}
	mark("credential stores")
	p.policy.Secrets, p.storesNote = append(p.policy.Secrets, found...), note
	if err := checkWritable(p.policy.Writable, userPolicy, c.UID); err != nil {
		return p, err
	}
	p.directBy = matchCommand(p.policy.NoTransaction, p.command)
	if p.spec, err = buildSpec(j, c, p); err != nil {
		return p, err
	}
	mark("spec")
	p.broker, err = r.newBroker(c, j, p)
	mark("broker")
	return p, err
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Scoped is the session a caller's name stands for: scoped by the
// caller's uid, as the broker, the grants and the breaker see it.
func Scoped(c Caller, name string) string { return scopedSession(c, name) }

// scopedSession is the session a request belongs to: the caller's uid
// and the name the caller gave, or a session of its own for this run.
func scopedSession(c Caller, name string) string {
	if name == "" {
		name = "run-" + newID()
	}
	return fmt.Sprintf("uid %d: %s", c.UID, name)
}

// launchSpec is the part of a run's spec its helper's launch depends
// on (who the command runs as, where, and in which isolation), which
// buildSpec starts from.
func launchSpec(c Caller, p *plan) sandbox.Spec {
	return sandbox.Spec{Workspace: p.ws, Home: c.Home, UID: c.UID, GID: c.GID, Groups: c.Groups, Umask: c.Umask,
		Isolation: p.policy.Isolation}
}

// buildSpec turns the resolved policy into a sandbox.Spec.
func buildSpec(j Job, c Caller, p *plan) (sandbox.Spec, error) {
	res := p.policy
	cache := c.Layout().Cache(p.ws)
	environ, _ := policy.FilterEnv(c.Env, res.EnvAllow, res.EnvDeny)
	environ = dropGitConfigEnv(environ)
	// The reviewer's key never enters the sandbox, whatever its name and
	// whatever [env] allow says.
	environ = envlist.Drop(environ, reviewKeyEnv(res.Review))
	environ = envlist.Set(environ, "TMPDIR", "/tmp")
	environ = envlist.Set(environ, "SANDBOXD", "1")
	environ = withCacheEnv(environ, cache)
	environ = withPhoneHomeOff(environ)
	read := []string{"/"}
	deny := append(append([]string(nil), res.Secrets...), p.hidden...)
	if res.Profile == "strict" {
		deny = append(deny, c.Home)
		if real, err := filepath.EvalSymlinks(c.Home); err == nil && real != c.Home {
			deny = append(deny, real)
		}
		read = append(read, res.HomeAllow...)
	}
	for _, w := range res.Writable {
		if pathtree.Within(w, p.ws) {
			return sandbox.Spec{}, publicerr.New(fmt.Sprintf("writable root %s contains the workspace", w))
		}
	}
	layers := cacheLayers(c, cache)
	var egress *sandbox.Egress
	if p.egress.port != 0 {
		egress = &sandbox.Egress{Port: p.egress.port, Env: p.egress.envFor(environ)}
	}
	s := launchSpec(c, p)
	s.Egress = egress
	s.Copies = sanitizedCopies(res.Secrets, c)
	s.Argv, s.Env, s.Dir = j.Argv, environ, p.cwd
	s.Writable, s.Caches, s.CacheLayers, s.HostCaches, s.Read, s.Deny = res.Writable, []string{cache}, layers, hostCacheRules(c, p), read, deny
	s.ListCarved, s.Protected = res.Profile != "strict", res.Protected
	s.GitConfigs, s.StateDir = c.GitConfigs, c.Layout().State
	s.Limits = sandbox.Limits{
		Pids: res.Limits.Pids, Memory: int64(res.Limits.Memory),
		FileSize: int64(res.Limits.FileSize), TmpSize: int64(res.Limits.TmpSize),
	}
	s.Timeout, s.NoDetect, s.Transaction = j.Timeout, j.NoDetect, !j.NoTransaction && p.directBy == ""
	s.LayerSize, s.RuntimeDir, s.Signals = int64(res.Limits.LayerSize), c.RuntimeDir, j.Signals
	s.Stdin, s.Stdout, s.Stderr, s.Pipes = j.Stdin, j.Stdout, j.Stderr, j.Pipes
	return s, nil
}

// reviewKeyEnv names the variable holding the model reviewer's key.
func reviewKeyEnv(r policy.Review) string {
	if r.APIKeyEnv != "" {
		return r.APIKeyEnv
	}
	return "OPENAI_API_KEY"
}

// withPhoneHomeOff adds each documented switch that stops a tool's own
// update check or usage report (policy.DefaultPhoneHomeOff), unless env
// sets that name already, in any case (npm reads npm_config_* in any
// case, the last one winning): the caller's own value wins.
func withPhoneHomeOff(env []string) []string {
	set := map[string]bool{}
	for _, kv := range env {
		set[strings.ToUpper(envlist.Key(kv))] = true
	}
	for _, sw := range policy.DefaultPhoneHomeOff() {
		if !set[strings.ToUpper(sw.Name)] {
			env = append(env, sw.Name+"="+sw.Value)
		}
	}
	return env
}

// newBroker builds the decision pipeline for this run: policy rules and
// hard denies, then the job's reviewer slots.
func (r *Runner) newBroker(c Caller, j Job, p *plan) (*broker.Broker, error) {
	model, person, info, err := r.reviewers(c, j, p)
	if err != nil {
		return nil, err
	}
	p.reviewer, p.model = info, model
	p.audit = &runAudit{also: r.auditor}
	if r.auditLog != nil {
		p.audit.log = r.auditLog(c.UID, envSecrets(c, p.policy.Review, p.policy.EnvDeny, p.policy.EnvAllow), p.policy.Audit)
	}
	var rules broker.Rules
	for _, set := range []struct {
		in  []string
		out *[]broker.Rule
	}{{p.policy.BoundaryAllow, &rules.Allow}, {p.policy.BoundaryAsk, &rules.Ask}, {p.policy.BoundaryDeny, &rules.Deny}} {
		for _, s := range set.in {
			rule, err := broker.ParseRule(s, c.Home)
			if err != nil {
				return nil, publicerr.Errorf(err, "your policy: boundaries: rule %q is not one sandboxd can apply (run with -v to log why)", s)
			}
			*set.out = append(*set.out, rule)
		}
	}
	var quiet []broker.QuietRule
	for _, q := range p.policy.Quiet {
		quiet = append(quiet, broker.QuietRule{Pattern: q.Pattern, Why: q.Why, Tools: q.Tools})
	}
	cfg := broker.Config{
		Rules:      rules,
		Quiet:      quiet,
		Production: production(p.policy),
		Hard: broker.HardDenies{
			Secrets:   p.policy.Secrets,
			Own:       append(append(c.Layout().Own(), filepath.Join(c.Home, ".local", "share", "sandboxd")), p.hidden...),
			Home:      c.Home,
			Workspace: p.ws,
			Local:     localAddrCheck(),
			Startup: persist.NewHostGuard(persist.HostConfig{
				Home: c.Home, ConfigHome: c.ConfigHome, DataHome: c.DataHome, Workspace: p.ws,
				Path: filepath.SplitList(c.Getenv("PATH")), GitConfigs: c.GitConfigs,
				Names: r.builtinNames,
			}),
		},
		// Network grants live as long as the run, which revokes them when
		// it ends (the broker's default bounds them at a day).
		NetworkUses: networkUses(p.policy.Network),
		Grants:      r.grants,
		Model:       model,
		Person:      person,
		Auditor:     p.audit,
		Log:         r.log,
		Grantable: func(req grants.Request) (bool, string) {
			if req.Surface == boundary.Network && req.Held {
				return true, "" // the proxy holds it and consumes the grant itself
			}
			return sandbox.Grantable(req.Surface, req.Operation)
		},
	}
	if j.Session != "" {
		act := func(f func() error) error { return fsid.Do(c.ID(), f) }
		cfg.Breaker = broker.NewBreaker(c.Layout().Breaker()).WithActor(act)
		// The caller's own state directory may hold the session's state
		// under its unscoped name, from before sessions were scoped.
		if err := cfg.Breaker.Adopt(p.session, j.Session); err != nil {
			return nil, publicerr.Wrap(err, "the circuit breaker's state for this session is unreadable")
		}
		// A person's override is for a retry in the same named session:
		// a run without one has nothing to come back to.
		ov := overrides.New(c.Layout().Overrides(), overrides.WithActor(act))
		cfg.Overrides, cfg.ModelDenials = ov, modelDenials{ov}
		// A person's intents are for the named session too.
		cfg.Intents = brokerIntents{s: intentStore(c), home: c.Home}
	}
	return broker.New(cfg), nil
}

// production is the broker's view of the policy's production markers
// and the caller's cloud and cluster places (resolved from the caller's
// environment).
func production(r policy.Resolved) broker.Production {
	out := broker.Production{Markers: r.Production}
	for _, pl := range r.ProductionPlaces {
		out.Places = append(out.Places, broker.ProductionPlace{Path: pl.Path, Tool: pl.Tool})
	}
	return out
}

// modelDenials records the broker's model denials in the override store.
type modelDenials struct{ s *overrides.Store }

// Record records one model denial of req.
func (m modelDenials) Record(ctx context.Context, req grants.Request, d broker.Decision) error {
	return m.s.Record(ctx, req, string(d.RiskLevel), d.Rationale)
}

// networkUses is how many connections one network grant covers.
func networkUses(n policy.Network) int {
	if n.GrantScope == policy.ScopeConnection {
		return 1
	}
	return grants.Unlimited
}

// logger is log, or a logger that discards.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// checkWritable names the policy file and key of a writable root that
// is not a directory the caller may write: the sandbox could not mount
// or grant it. It runs as the caller, so the kernel answers for it.
func checkWritable(roots []string, file string, uid int) error {
	for _, w := range roots {
		st, err := os.Stat(w)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return publicerr.Wrap(err, fmt.Sprintf("%s: filesystem.writable: %s does not exist (create it, or remove it from the list)", file, w))
		case err != nil:
			return publicerr.Wrap(err, fmt.Sprintf("%s: filesystem.writable: %s cannot be reached by uid %d", file, w, uid))
		case !st.IsDir():
			return publicerr.New(fmt.Sprintf("%s: filesystem.writable: %s is not a directory", file, w))
		}
		if err := fsid.Access(w, unix.W_OK|unix.X_OK); err != nil {
			return publicerr.Wrap(err, fmt.Sprintf("%s: filesystem.writable: %s is not writable by uid %d", file, w, uid))
		}
	}
	return nil
}

// mixedConfigs are credential-store files that also hold a tool's
// settings (absolute), each with what removes the credentials: the
// command reads a copy without them; the original stays unreadable.
func mixedConfigs(c Caller) map[string]func([]byte) []byte {
	m := map[string]func([]byte) []byte{
		filepath.Join(c.Home, ".npmrc"):                       credfile.Npmrc,
		filepath.Join(c.Home, ".gradle", "gradle.properties"): credfile.GradleProperties,
		filepath.Join(c.Home, ".yarnrc.yml"):                  credfile.YarnrcYML,
	}
	for _, v := range []string{"NPM_CONFIG_USERCONFIG", "npm_config_userconfig"} {
		if n := c.Getenv(v); filepath.IsAbs(n) {
			m[filepath.Clean(n)] = credfile.Npmrc
		}
	}
	if g := c.Getenv("GRADLE_USER_HOME"); filepath.IsAbs(g) {
		m[filepath.Join(filepath.Clean(g), "gradle.properties")] = credfile.GradleProperties
	}
	return m
}

// maxCopy bounds a config file sandboxd will sanitize.
const maxCopy = 1 << 20

// sanitizedCopies returns a copy without credentials of each mixed
// config that the policy denies and that is a regular file.
func sanitizedCopies(secrets []string, c Caller) []sandbox.Copy {
	var out []sandbox.Copy
	for path, clean := range mixedConfigs(c) {
		if !slices.Contains(secrets, path) {
			continue // readable as it is, or not the caller's to show
		}
		st, err := os.Lstat(path)
		if err != nil || !st.Mode().IsRegular() || st.Size() > maxCopy {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		out = append(out, sandbox.Copy{Path: path, Data: clean(data)})
	}
	slices.SortFunc(out, func(a, b sandbox.Copy) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// matchCommand returns the first pattern that matches the whole command
// string, or "". In a pattern "*" stands for any run of characters
// (spaces and slashes included); everything else is literal.
func matchCommand(patterns []string, command string) string {
	for _, pat := range patterns {
		if globMatch(pat, command) {
			return pat
		}
	}
	return ""
}

// globMatch matches s against pattern, where only "*" is special.
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// policyUnusable gives an error of loading or resolving the policy its
// public sentence: the policy package's own, which names only the
// user's file, line and key and its words about them, or a fixed one.
func policyUnusable(err error) error {
	var pe *policy.Error
	if !errors.As(err, &pe) {
		return publicerr.Wrap(err, "the policy could not be loaded because of an internal error (run with -v to log why)")
	}
	shown := *pe
	if shown.File == "" {
		shown.File = "your policy" // the policy resolved from the files
	}
	return publicerr.Wrap(err, shown.Error())
}
