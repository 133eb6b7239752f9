package suggest

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/grants"
	"github.com/sandboxd/sandboxd/netdest"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/termfilter"
)

const (
	home       = "/home/u"
	policyFile = "/home/u/.config/sandboxd/policy.toml"
)

func fsDenial(op boundary.Operation, path string, src broker.Source) Boundary {
	return Boundary{Surface: boundary.Filesystem, Operation: op, Path: path, Decision: broker.Deny, Source: src}
}

func netDenial(dest string, src broker.Source) Boundary {
	return Boundary{Surface: boundary.Network, Operation: boundary.OpConnect, Destination: dest, Decision: broker.Deny, Source: src}
}

// Which denials get a rule: those an allow rule would have let through,
// because allow rules are consulted before any reviewer.
func TestForSources(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Boundary
		rule string // "" when none is offered
		why  string // a part of the reason when none is
	}{
		{"no reviewer", fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceNoReviewer), "fs write_file /etc/hosts", ""},
		{"the model", fsDenial(boundary.OpReadFile, "/home/u/data/x.csv", broker.SourceReviewer), "fs read_file ~/data/x.csv", ""},
		{"a person", netDenial("example.org:443", broker.SourceHuman), "net connect example.org:443", ""},
		{"a held connection nobody decided", netDenial("[2001:db8::1]:8443", broker.SourceNoReviewer), "net connect [2001:db8::1]:8443", ""},
		{"hard deny", Boundary{Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/home/u/.ssh/id_rsa",
			Decision: broker.Deny, Source: broker.SourceHardDeny, Rationale: "credential stores are never opened to a sandboxed command"},
			"", "a hard deny, decided before any allow rule: credential stores are never opened"},
		{"start-up location", Boundary{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/home/u/.bashrc",
			Decision: broker.Deny, Source: broker.SourceHardDeny, Rationale: "a start-up location: bash runs it"}, "", "a start-up location"},
		{"policy deny rule", fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourcePolicy), "", "a deny rule beats every allow rule"},
		{"lockdown", fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceCircuitBreaker), "", "locked down"},
		{"error", fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceError), "", "could not decide"},
		{"quiet", fsDenial(boundary.OpWriteFile, "/home/u/.toprc", broker.SourceQuiet), "", "quietly"},
		{"unknown source", fsDenial(boundary.OpWriteFile, "/etc/hosts", "oracle"), "", `"oracle"`},
		{"allowed", Boundary{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/etc/hosts", Decision: broker.Allow, Source: broker.SourceHuman}, "", "not denied"},
		{"no decision", Boundary{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/etc/hosts", Source: broker.SourceNoReviewer}, "", "not denied"},
		{"a command", Boundary{Surface: boundary.Command, Operation: boundary.OpRun, Decision: broker.Deny, Source: broker.SourceReviewer}, "", "no rule names it"},
		{"relative path", fsDenial(boundary.OpWriteFile, "etc/hosts", broker.SourceNoReviewer), "", "not absolute and clean"},
		{"unclean path", fsDenial(boundary.OpWriteFile, "/etc/../etc/hosts", broker.SourceNoReviewer), "", "not absolute and clean"},
		{"unnormalised destination", netDenial("Example.ORG:443", broker.SourceNoReviewer), "", "normalised"},
		{"invalid UTF-8", fsDenial(boundary.OpWriteFile, "/tmp/\xff", broker.SourceNoReviewer), "", "not valid UTF-8"},
		{"replacement character", fsDenial(boundary.OpWriteFile, "/tmp/\ufffd", broker.SourceNoReviewer), "", "U+FFFD"},
		{"NUL", fsDenial(boundary.OpWriteFile, "/tmp/a\x00b", broker.SourceNoReviewer), "", "not absolute and clean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := For(tc.b, home, policyFile, nothingBefore)
			if s.Rule != tc.rule {
				t.Fatalf("rule %q, want %q (why %q)", s.Rule, tc.rule, s.Why)
			}
			if tc.rule == "" {
				if s.TOML != "" || !strings.Contains(s.Why, tc.why) {
					t.Fatalf("no rule: toml %q, why %q, want it to say %q", s.TOML, s.Why, tc.why)
				}
				return
			}
			if s.Why != "" {
				t.Fatalf("a rule with a why: %q", s.Why)
			}
			checkSuggestion(t, tc.b, s, home)
		})
	}
}

// Names that would be a wildcard, a second field, a TOML escape or an
// invisible trick each come out as a rule for that one name.
func TestForNames(t *testing.T) {
	for _, tc := range []struct{ path, rule, toml string }{
		{"/srv/a b", `fs write_file /srv/a\ b`, `"fs write_file /srv/a\\ b"`},
		{"/srv/*", `fs write_file /srv/\*`, `"fs write_file /srv/\\*"`},
		{"/srv/**", `fs write_file /srv/\*\*`, `"fs write_file /srv/\\*\\*"`},
		{"/srv/[ab]?", `fs write_file /srv/\[ab\]\?`, `"fs write_file /srv/\\[ab\\]\\?"`},
		{`/srv/a\b`, `fs write_file /srv/a\\b`, `"fs write_file /srv/a\\\\b"`},
		{`/srv/say "hi"`, `fs write_file /srv/say\ "hi"`, `"fs write_file /srv/say\\ \"hi\""`},
		{"/srv/a\nb", "fs write_file /srv/a\\\nb", `"fs write_file /srv/a\\\nb"`},
		{"/srv/a\tb\rc", "fs write_file /srv/a\\\tb\\\rc", `"fs write_file /srv/a\\\tb\\\rc"`},
		{"/srv/\x1b[31mred", "fs write_file /srv/\x1b\\[31mred", `"fs write_file /srv/\u001B\\[31mred"`},
		{"/srv/evil\u202etxt.sh", "fs write_file /srv/evil\u202etxt.sh", `"fs write_file /srv/evil\u202Etxt.sh"`},
		{"/srv/nb\u00a0sp", "fs write_file /srv/nb\\\u00a0sp", `"fs write_file /srv/nb\\\u00A0sp"`},
		{"/srv/\U000e0041tag", "fs write_file /srv/\U000e0041tag", `"fs write_file /srv/\U000E0041tag"`},
		{"/srv/~", "fs write_file /srv/~", `"fs write_file /srv/~"`},
		{"/srv/ lead/trail ", `fs write_file /srv/\ lead/trail\ `, `"fs write_file /srv/\\ lead/trail\\ "`},
		{"/srv/über", "fs write_file /srv/über", `"fs write_file /srv/über"`},
		{"/home/u/~/x", "fs write_file ~/~/x", `"fs write_file ~/~/x"`},
		{"/home/u/#x", "fs write_file ~/#x", `"fs write_file ~/#x"`},
		{"/home/u", "fs write_file /home/u", `"fs write_file /home/u"`},
		{"/home/user", "fs write_file /home/user", `"fs write_file /home/user"`},
		{"/", "fs write_file /", `"fs write_file /"`},
	} {
		b := fsDenial(boundary.OpWriteFile, tc.path, broker.SourceNoReviewer)
		s := For(b, home, policyFile, nothingBefore)
		if s.Rule != tc.rule || !strings.Contains(s.TOML, "\n  "+tc.toml+",\n") {
			t.Errorf("%q: rule %q, toml\n%s\nwant %q as %s", tc.path, s.Rule, s.TOML, tc.rule, tc.toml)
			continue
		}
		checkSuggestion(t, b, s, home)
	}
}

// A home whose name holds wildcards, spaces or a backslash: the rule is
// for the one path below it.
func TestForOddHome(t *testing.T) {
	for _, h := range []string{"/home/*", "/home/a b", `/home/a\b`, "/home/[u]", "/home/u?", "/"} {
		p := strings.TrimSuffix(h, "/") + "/data/x"
		b := fsDenial(boundary.OpReadFile, p, broker.SourceHuman)
		s := For(b, h, policyFile, nothingBefore)
		if s.Rule == "" {
			t.Fatalf("home %q: no rule: %s", h, s.Why)
		}
		checkSuggestion(t, b, s, h)
		r, _ := broker.ParseRule(s.Rule, h)
		if r.Matches(grants.Request{Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/home/x/data/x", ResolvedPath: "/home/x/data/x"}) {
			t.Fatalf("home %q: %q reaches another home", h, s.Rule)
		}
	}
}

func TestTOML(t *testing.T) {
	got := TOML("/home/u/.config/sandboxd/policy.toml", []string{"fs write_file /etc/hosts", `fs read_file ~/a\ b`})
	want := `# Add to the allow list of [boundaries] in your policy file /home/u/.config/sandboxd/policy.toml
# (a deny or ask rule that matches the same boundary still wins):
[boundaries]
allow = [
  "fs write_file /etc/hosts",
  "fs read_file ~/a\\ b",
]
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A policy file whose name would end the comment stays in it.
	s := TOML("/tmp/p\n[boundaries]\nallow = [\"fs * /**\"]\n#.toml", []string{"fs write_file /etc/hosts"})
	checkTOML(t, s, []string{"fs write_file /etc/hosts"})
}

func TestText(t *testing.T) {
	bs := []Boundary{
		fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceNoReviewer),
		fsDenial(boundary.OpWriteFile, "/etc/hosts", broker.SourceNoReviewer), // the retry met it again
		netDenial("example.org:443", broker.SourceHuman),
		{Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/home/u/.ssh/id_rsa\n[x]", Decision: broker.Deny,
			Source: broker.SourceHardDeny, Rationale: "credential stores are never opened to a sandboxed command"},
		{Surface: boundary.Filesystem, Operation: boundary.OpReadFile, Path: "/etc/motd", Decision: broker.Allow, Source: broker.SourcePolicy},
	}
	got := Text(bs, home, policyFile, nothingBefore)
	want := `# Add to the allow list of [boundaries] in your policy file /home/u/.config/sandboxd/policy.toml
# (a deny or ask rule that matches the same boundary still wins):
[boundaries]
allow = [
  "fs write_file /etc/hosts",
  "net connect example.org:443",
]

# No rule is offered for:
#   read_file /home/u/.ssh/id_rsa\n[x]: a hard deny, decided before any allow rule: credential stores are never opened to a sandboxed command
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	checkTOML(t, got, []string{"fs write_file /etc/hosts", "net connect example.org:443"})
	if got := Text(bs[3:], home, policyFile, nothingBefore); !strings.Contains(got, "# No rule can allow what was denied.\n") {
		t.Fatalf("only hard denies:\n%s", got)
	}
	if got := Text(bs[4:], home, policyFile, nothingBefore); !strings.Contains(got, "# Nothing was denied.\n") {
		t.Fatalf("nothing denied:\n%s", got)
	}
	if got := Text(nil, home, policyFile, nothingBefore); !strings.HasPrefix(got, "# Your policy file: "+policyFile+"\n") {
		t.Fatalf("no boundaries:\n%s", got)
	}
}

// checkSuggestion checks that s is b's one exact rule: its TOML parses,
// as the policy loads it, to exactly that rule, which parses (with home)
// to a rule that matches b, not b's other operations nor any name next
// to b's.
func checkSuggestion(t *testing.T, b Boundary, s Suggestion, home string) {
	t.Helper()
	checkTOML(t, s.TOML, []string{s.Rule})
	r, err := broker.ParseRule(s.Rule, home)
	if err != nil {
		t.Fatalf("%q does not parse: %v", s.Rule, err)
	}
	req := request(b, b.target())
	if !r.Matches(req) || !r.MatchesEither(req) {
		t.Fatalf("%q does not match %s %q", s.Rule, b.Operation, b.target())
	}
	for _, op := range boundary.Operations(b.Surface) {
		other := req
		other.Operation = op
		if op != b.Operation && r.MatchesEither(other) {
			t.Fatalf("%q matches operation %s too", s.Rule, op)
		}
	}
	var others []string
	if b.Surface == boundary.Network {
		others = destNeighbours(b.Destination)
	} else {
		others = pathNeighbours(b.Path)
	}
	for _, o := range others {
		if o != b.target() && r.MatchesEither(request(b, o)) {
			t.Fatalf("%q for %q matches %q too", s.Rule, b.target(), o)
		}
	}
}

// request is b's request with target as its path or destination (a
// destination normalised, so a spelling of the same one matches too).
func request(b Boundary, target string) grants.Request {
	req := grants.Request{Surface: b.Surface, Operation: b.Operation}
	if b.Surface == boundary.Network {
		req.Destination, _ = netdest.ParseHostPort(target)
	} else {
		req.Path, req.ResolvedPath = target, target
	}
	return req
}

// checkTOML checks that text is valid TOML (as go-toml and the policy
// loader read it) whose boundaries.allow is exactly rules, and that it
// shows on a terminal as it is (only its backslashes would be escaped).
func checkTOML(t *testing.T, text string, rules []string) {
	t.Helper()
	var doc struct {
		Boundaries struct {
			Allow []string `toml:"allow"`
		} `toml:"boundaries"`
	}
	if err := toml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("not TOML: %v\n%s", err, text)
	}
	if strings.Join(doc.Boundaries.Allow, "\x00") != strings.Join(rules, "\x00") {
		t.Fatalf("allow = %q, want %q\n%s", doc.Boundaries.Allow, rules, text)
	}
	p, err := policy.Parse("policy.toml", []byte(text), policy.Default())
	if err != nil {
		t.Fatalf("the policy loader refuses it: %v\n%s", err, text)
	}
	if strings.Join(p.Boundaries.Allow, "\x00") != strings.Join(rules, "\x00") {
		t.Fatalf("the policy holds %q, want %q", p.Boundaries.Allow, rules)
	}
	for _, line := range strings.Split(text, "\n") {
		if termfilter.Escape(line) != strings.ReplaceAll(line, `\`, `\\`) {
			t.Fatalf("line %q does not show as it is: %q", line, termfilter.Escape(line))
		}
	}
}

// nothingBefore stands for a broker that denies nothing before its
// allow rules.
func nothingBefore(grants.Request) (string, bool) { return "", false }

// A report's source is never trusted: a denial the caller's broker
// refuses before any allow rule (a start-up location, a secret) gets no
// rule whatever source the report claims, and without the broker's
// check no rule is offered at all.
func TestForAsksTheBroker(t *testing.T) {
	forged := Boundary{Surface: boundary.Filesystem, Operation: boundary.OpWriteFile, Path: "/home/u/.bashrc",
		Decision: broker.Deny, Source: broker.SourceReviewer}
	var asked grants.Request
	startup := func(req grants.Request) (string, bool) {
		asked = req
		return "a start-up location: bash reads it", req.Path == "/home/u/.bashrc"
	}
	s := For(forged, "/home/u", "/p.toml", startup)
	if s.Rule != "" || !strings.Contains(s.Why, "start-up location") {
		t.Errorf("a forged reviewer denial of ~/.bashrc got %+v", s)
	}
	if asked.Path != "/home/u/.bashrc" || asked.ResolvedPath != "/home/u/.bashrc" || asked.Operation != boundary.OpWriteFile {
		t.Errorf("the broker was asked %+v", asked)
	}
	other := forged
	other.Path = "/home/u/notes.txt"
	if s := For(other, "/home/u", "/p.toml", startup); s.Rule == "" {
		t.Errorf("an ordinary denial got no rule: %+v", s)
	}
	if s := For(other, "/home/u", "/p.toml", nil); s.Rule != "" || s.Why == "" {
		t.Errorf("without the broker's check a rule was offered: %+v", s)
	}
}
