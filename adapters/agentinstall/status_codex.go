package agentinstall

import (
	"encoding/json"
	"strconv"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/ruletext"
)

// codexGroup is a hooks.json group as Codex reads it.
type codexGroup struct {
	Matcher *string `json:"matcher"`
	Hooks   []struct {
		Type          string  `json:"type"`
		Command       string  `json:"command"`
		Timeout       *int64  `json:"timeout"`
		Async         bool    `json:"async"`
		StatusMessage *string `json:"statusMessage"`
	} `json:"hooks"`
}

// codexFound is where sandboxd's handler for one matcher is.
type codexFound struct {
	group, handler int
	hash           string
}

// codexFind finds sandboxd's handler for matcher in groups, with the
// trust hash Codex computes for it as it is written.
func codexFind(groups []string, matcher, sandboxd string) (codexFound, bool) {
	for gi, g := range groups {
		var grp codexGroup
		if json.Unmarshal([]byte(g), &grp) != nil || grp.Matcher == nil || *grp.Matcher != matcher {
			continue
		}
		for hi, h := range grp.Hooks {
			if h.Type != "command" || h.Command != agenthook.CodexHookCommand(sandboxd) {
				continue
			}
			t := int64(codexHookTimeout)
			if h.Timeout != nil {
				t = *h.Timeout
			}
			return codexFound{gi, hi, codexTrustHash(grp.Matcher, codexHandler{h.Command, t, h.Async, h.StatusMessage})}, true
		}
	}
	return codexFound{}, false
}

func statusCodex(e Env) []Check {
	sb, recorded := statusSandboxd(codexAgent, e)
	out := []Check{binaryCheck(e, sb, recorded)}
	hj, bad := statusFile(e, codexHooksJSON(e), "hooks")
	if bad != nil {
		out = append(out, *bad)
	}
	ct, bad := statusFile(e, codexConfig(e), "config")
	if bad != nil {
		return append(out, *bad)
	}
	if hj != nil {
		out = append(out, codexHookChecks(e, hj, ct, sb)...)
	}
	return append(out, codexConfigChecks(ct)...)
}

// codexHookChecks: each hook is in hooks.json, and config.toml trusts
// it as it is written now.
func codexHookChecks(e Env, hj, ct *agentFile, sb string) []Check {
	groups, err := hj.doc.elems(codexHooksPath)
	if err != nil {
		return []Check{{Piece: "hooks", Detail: hj.shown + ": hooks.PreToolUse is not a list"}}
	}
	var out []Check
	for _, m := range codexMatchers {
		found, ok := codexFind(groups, m, sb)
		if !ok {
			out = append(out, Check{Piece: "hook " + m, Detail: hj.shown + " has no PreToolUse hook for " + m + " running sandboxd"})
			continue
		}
		out = append(out, Check{Piece: "hook " + m, OK: true, Detail: "group " + strconv.Itoa(found.group) + " of " + hj.shown})
		key := codexTrustKey(e, found.group, found.handler)
		c := Check{Piece: "trust " + m}
		raw, ok, _ := ct.doc.get(codexTrustPath(key))
		enabled, eok, _ := ct.doc.get([]string{"hooks", "state", key, "enabled"})
		switch {
		case !ok:
			c.Detail = ct.shown + " does not trust it: Codex skips it and runs commands bare"
		case !ct.doc.same(raw, ruletext.TOMLString(found.hash)):
			c.Detail = ct.shown + " trusts an earlier version of it: Codex skips it and runs commands bare; run install again"
		case eok && ct.doc.same(enabled, "false"):
			c.Detail = ct.shown + " disables it (enabled = false)"
		default:
			c.OK, c.Detail = true, "trusted as it is written"
		}
		out = append(out, c)
	}
	return out
}

// codexConfigChecks: Codex's own sandbox is off, no login shell, hooks on.
func codexConfigChecks(ct *agentFile) []Check {
	var out []Check
	for _, want := range []struct {
		path       []string
		value, why string
	}{
		{codexSandbox, ruletext.TOMLString("danger-full-access"), "Codex's own sandbox keeps sandboxd from making its namespaces, and every command fails"},
		{codexLogin, tomlBool(false), "Codex runs bash -lc, whose profile runs outside sandboxd"},
	} {
		name := tomlDotted(want.path)
		c := Check{Piece: name}
		raw, ok, _ := ct.doc.get(want.path)
		if ok && ct.doc.same(raw, want.value) {
			c.OK, c.Detail = true, name+" = "+want.value
		} else {
			c.Detail = ct.shown + " does not set " + name + " = " + want.value + ": " + want.why
		}
		out = append(out, c)
	}
	if raw, ok, _ := ct.doc.get([]string{"features", "hooks"}); ok && ct.doc.same(raw, "false") {
		out = append(out, Check{Piece: "features.hooks", Detail: ct.shown + " sets features.hooks = false: no hook runs"})
	}
	if p, ok, _ := ct.doc.get([]string{"profile"}); ok {
		if v, err := tomlValue(p); err == nil {
			if name, _ := v.(string); name != "" {
				if raw, ok, _ := ct.doc.get([]string{"profiles", name, "sandbox_mode"}); ok && !ct.doc.same(raw, ruletext.TOMLString("danger-full-access")) {
					out = append(out, Check{Piece: "profile", Detail: ct.shown + "'s profile " + strconv.Quote(name) + " sets sandbox_mode = " + raw + ", over the top-level one"})
				}
			}
		}
	}
	return out
}
