package agentinstall

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/adapters/agenthook"
	"github.com/sandboxd/sandboxd/publicerr"
	"github.com/sandboxd/sandboxd/ruletext"
)

const codexAgent = agenthook.Codex

// codexHookTimeout is the hooks' timeout in seconds, Codex's default: a
// Codex hook that times out lets the command run bare, so it is long.
const codexHookTimeout = 600

// codexMatchers are the tools whose PreToolUse hook install adds: the
// shell, and apply_patch, which writes files outside any sandbox under
// danger-full-access.
var codexMatchers = []string{"Bash", "apply_patch"}

var (
	codexHooksPath = []string{"hooks", "PreToolUse"}
	codexSandbox   = []string{"sandbox_mode"}
	codexLogin     = []string{"allow_login_shell"}
)

func codexHooksJSON(e Env) string { return filepath.Join(e.CodexHome, "hooks.json") }
func codexConfig(e Env) string    { return filepath.Join(e.CodexHome, "config.toml") }

// codexHandler is one hook handler as Codex normalises it for its trust
// hash.
type codexHandler struct {
	Command       string
	Timeout       int64 // seconds; absent is 600, and less than 1 is 1
	Async         bool
	StatusMessage *string
}

// codexTrustHash is the hash Codex 0.171 keeps in config.toml for a
// trusted PreToolUse handler: sha256 of the canonical JSON (keys sorted,
// no spaces, strings escaped as serde_json does) of the group's
// identity. Checked against the real codex (TestCodexTrustsWhatInstallWrites).
func codexTrustHash(matcher *string, h codexHandler) string {
	var b strings.Builder
	b.WriteString(`{"event_name":"pre_tool_use","hooks":[{"async":`)
	b.WriteString(strconv.FormatBool(h.Async))
	b.WriteString(`,"command":`)
	b.WriteString(serdeString(h.Command))
	if h.StatusMessage != nil {
		b.WriteString(`,"statusMessage":`)
		b.WriteString(serdeString(*h.StatusMessage))
	}
	b.WriteString(`,"timeout":`)
	b.WriteString(strconv.FormatInt(max(h.Timeout, 1), 10))
	b.WriteString(`,"type":"command"}]`)
	if matcher != nil {
		b.WriteString(`,"matcher":`)
		b.WriteString(serdeString(*matcher))
	}
	b.WriteString("}")
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// serdeString is s as serde_json writes a string: only '"', '\\' and
// control characters escaped, the short forms where JSON has them.
func serdeString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func codexHookGroup(matcher, sandboxd string) string {
	type hook struct {
		Type    string `json:"type"`
		Command string `json:"command"`
		Timeout int    `json:"timeout"`
	}
	type group struct {
		Matcher string `json:"matcher"`
		Hooks   []hook `json:"hooks"`
	}
	return string(jsonValue(group{matcher, []hook{{"command", agenthook.CodexHookCommand(sandboxd), codexHookTimeout}}}))
}

func codexHookPieces(e Env) []piece {
	var out []piece
	for _, m := range codexMatchers {
		why := "a failure of sandboxd blocks the command; a timeout of the hook (600 s) does not"
		if m == "apply_patch" {
			why = "sandboxd judges each patch; a failure of sandboxd blocks it"
		}
		out = append(out, piece{op: opAdd, path: codexHooksPath, slot: "hook " + m, value: codexHookGroup(m, e.Sandboxd), what: "the PreToolUse hook for " + m, why: why})
	}
	return out
}

// codexTrustKey is Codex's name for a handler of a group of the user's
// hooks.json: the file's path below CODEX_HOME with its links resolved,
// as Codex resolves it, the event and the two indexes.
func codexTrustKey(e Env, group, handler int) string {
	home, err := agenthook.ResolveExisting(e.CodexHome)
	if err != nil {
		home = e.CodexHome
	}
	return filepath.Join(home, "hooks.json") + ":pre_tool_use:" + strconv.Itoa(group) + ":" + strconv.Itoa(handler)
}

func codexTrustPath(key string) []string { return []string{"hooks", "state", key, "trusted_hash"} }

// codexConfigPieces are config.toml's: Codex's own sandbox off (it
// keeps sandboxd from making its namespaces; sandboxd is the sandbox),
// no login shell (bash -l would run the profile outside sandboxd before
// the rewritten command), and trust in each group at its index.
func codexConfigPieces(e Env, groups []int) []piece {
	out := []piece{
		{op: opSet, path: codexSandbox, slot: "sandbox_mode", value: ruletext.TOMLString("danger-full-access"),
			what: `sandbox_mode = "danger-full-access"`, why: "Codex's own sandbox would keep sandboxd from making its namespaces; sandboxd is the sandbox"},
		{op: opSet, path: codexLogin, slot: "allow_login_shell", value: tomlBool(false),
			what: "allow_login_shell = false", why: "a login shell would run your shell profile outside sandboxd before each command"},
	}
	for i, m := range codexMatchers {
		out = append(out, piece{op: opSet, path: codexTrustPath(codexTrustKey(e, groups[i], 0)), slot: "trust " + m,
			value: ruletext.TOMLString(codexTrustHash(&codexMatchers[i], codexHandler{Command: agenthook.CodexHookCommand(e.Sandboxd), Timeout: codexHookTimeout})),
			what:  "Codex's trust in the " + m + " hook (group " + strconv.Itoa(groups[i]) + " of hooks.json)", why: "Codex runs only hooks it trusts",
			label: "the trust hash of hook group " + strconv.Itoa(groups[i]) + " of hooks.json"})
	}
	return out
}

func installCodex(e Env, o Options) ([]Change, error) {
	t, err := newTxn(codexAgent, e, o)
	if err != nil {
		return nil, err
	}
	hj, err := t.open(codexHooksJSON(e))
	if err != nil {
		return nil, err
	}
	if err := t.install(hj, codexHookPieces(e)); err != nil {
		return nil, err
	}
	groups, err := hj.doc.elems(codexHooksPath)
	if err != nil {
		return nil, err
	}
	var at []int
	for _, p := range codexHookPieces(e) {
		i := indexOf(hj.doc, groups, p.value)
		if i < 0 {
			return nil, errors.New("codex: a hook group install added is not in hooks.json")
		}
		at = append(at, i)
	}
	ct, err := t.open(codexConfig(e))
	if err != nil {
		return nil, err
	}
	pieces := codexConfigPieces(e, at)
	if err := t.install(ct, pieces); err != nil {
		return nil, err
	}
	if err := verifyTOML(ct, pieces); err != nil {
		return nil, err
	}
	return t.finishInstall()
}

// verifyTOML checks that the edited text reads back as the pieces say:
// a key the user also defined some other way must not leave Codex
// reading another value, or a file it cannot read.
func verifyTOML(f *agentFile, pieces []piece) error {
	d := f.doc.(tomlFile).d
	if _, err := d.decode(); err != nil {
		return publicerr.Errorf(err, "%s would not be valid TOML after the edit (a key of the installer's is set there in another way); nothing was changed", f.shown)
	}
	for _, p := range pieces {
		raw, found, err := d.get(p.path)
		if err != nil || !found || !f.doc.same(raw, p.value) {
			return publicerr.Errorf(err, "%s would not read %s = %s after the edit (it is set there in another way); nothing was changed", f.shown, tomlDotted(p.path), p.value)
		}
	}
	return nil
}

// codexShifted says which groups of hooks.json move up when uninstall
// takes out the ones install added: Codex names a group's trust by its
// index, so each such group needs trusting again.
func codexShifted(t *txn, fr fileRecord) ([]string, error) {
	f, err := t.open(fr.Path)
	if err != nil {
		return nil, err
	}
	groups, err := f.doc.elems(codexHooksPath)
	if err != nil || len(groups) == 0 {
		return nil, nil
	}
	ours := make([]bool, len(groups))
	for _, e := range fr.Entries {
		if i := indexOf(f.doc, groups, e.Value); e.Op == opAdd && i >= 0 {
			ours[i] = true
		}
	}
	first, moved := -1, 0
	for i, o := range ours {
		switch {
		case o && first < 0:
			first = i
		case !o && first >= 0:
			moved++
		}
	}
	if moved == 0 {
		return nil, nil
	}
	return []string{fmt.Sprintf("%d hook group(s) of yours after sandboxd's moved up: Codex now sees them as changed and skips them until you trust them again (Codex's /hooks)", moved)}, nil
}

// statFile is a regular file's mode, or an error the status says.
func statFile(path string) (fs.FileMode, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return fi.Mode(), nil
}
