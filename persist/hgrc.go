package persist

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
)

// A Mercurial config file (a repository's .hg/hgrc, .hg/hgrc-not-shared),
// read as mercurial/config.py's parse reads it: line by line, a section
// "[name]", items "key = value" continued by indented lines, comments
// starting with ";" or "#", "%include path" and "%unset key"; a line that
// is none of these makes hg refuse the file, and sandboxd too.

// hgEntry is one item or directive of an hgrc.
type hgEntry struct {
	section, key, value string
	include             bool // %include value
	unset               bool // %unset key
}

// Python's \s for bytes is [ \t\n\r\f\v]; Go's lacks \v, so the class
// is spelled out (ws).
var (
	hgSection = regexp.MustCompile(`^\[([^\[]+)\]`)
	hgItem    = regexp.MustCompile(`^([^=` + ws + `][^=]*?)[` + ws + `]*=[` + ws + `]*(.*[^` + ws + `]|)`)
	hgCont    = regexp.MustCompile(`^[` + ws + `]+([^` + ws + `]|[^` + ws + `].*[^` + ws + `])[` + ws + `]*$`)
	hgEmpty   = regexp.MustCompile(`^(;|#|[` + ws + `]*$)`)
	hgComment = regexp.MustCompile(`^(;|#)`)
	hgUnset   = regexp.MustCompile(`^%unset[` + ws + `]+([^` + ws + `]+)`)
	hgInclude = regexp.MustCompile(`^%include[` + ws + `]+([^` + ws + `]|[^` + ws + `].*[^` + ws + `])[` + ws + `]*$`)
)

// ws is Python's whitespace class for bytes patterns.
const ws = ` \t\n\r\f\v`

// parseHgrc reads b as hg does. Entries come in file order; a continued
// value is joined with "\n" as hg joins it.
func parseHgrc(b []byte) ([]hgEntry, error) {
	var out []hgEntry
	section := ""
	item := -1 // the entry a continuation line extends
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
	for n, l := range splitLinesKeep(b) {
		if item >= 0 {
			if hgComment.Match(l) {
				continue
			}
			if m := hgCont.FindSubmatch(l); m != nil {
				out[item].value += "\n" + string(m[1])
				continue
			}
			item = -1
		}
		if m := hgInclude.FindSubmatch(l); m != nil {
			out = append(out, hgEntry{section: section, value: string(m[1]), include: true})
			continue
		}
		if hgEmpty.Match(l) {
			continue
		}
		if m := hgSection.FindSubmatch(l); m != nil {
			section = string(m[1])
			continue
		}
		if m := hgItem.FindSubmatch(l); m != nil {
			out = append(out, hgEntry{section: section, key: string(m[1]), value: string(m[2])})
			item = len(out) - 1
			continue
		}
		if m := hgUnset.FindSubmatch(l); m != nil {
			out = append(out, hgEntry{section: section, key: string(m[1]), unset: true})
			continue
		}
		return nil, fmt.Errorf("line %d is not one hg reads", n+1)
	}
	return out, nil
}

// splitLinesKeep splits b as Python's bytes.splitlines(True) does: at
// "\n", "\r\n" and "\r", each line keeping its end.
func splitLinesKeep(b []byte) [][]byte {
	var out [][]byte
	start := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\n':
			out = append(out, b[start:i+1])
			start = i + 1
		case '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
			out = append(out, b[start:i+1])
			start = i + 1
		}
	}
	if start < len(b) {
		out = append(out, b[start:])
	}
	return out
}

// hgrcSettings is the SettingsRule of a repository's hgrc: every entry
// must be one the allow-list says runs nothing (hgSafe); %include is
// refused (it loads an unchecked file), and a [paths] entry may not name
// a repository the command could have planted outside the workspace (a
// local peer's own hgrc runs on pull and clone).
func hgrcSettings(b []byte, env SettingsEnv) ([]Setting, error) {
	ents, err := parseHgrc(b)
	if err != nil {
		return nil, err
	}
	var out []Setting
	for _, e := range ents {
		key := e.section + "." + e.key
		switch {
		case e.include:
			out = append(out, Setting{Key: "%include", Value: e.value, Why: "hg loads another config file from it"})
		case e.unset:
			// Removing a setting runs nothing.
		case e.section == "paths":
			if p, local := hgLocalPath(e.value); local && env.Plantable(p) {
				out = append(out, Setting{Key: key, Value: e.value, Why: "it names a repository the command could have planted, whose own hgrc runs on pull"})
			}
		case !hgSafe(e.section, e.key, e.value):
			out = append(out, Setting{Key: key, Value: e.value, Why: "hg can run a program or load code through " + e.section + " settings (hooks, extensions, aliases, merge tools, editors, ssh)"})
		}
	}
	return out, nil
}

// hgLocalPath is the local path a [paths] value names, if it is one.
func hgLocalPath(v string) (string, bool) {
	for _, scheme := range []string{"http://", "https://", "ssh://"} {
		if strings.HasPrefix(strings.ToLower(v), scheme) {
			return "", false
		}
	}
	v = strings.TrimPrefix(v, "file://")
	v = strings.TrimPrefix(v, "file:")
	return v, v != ""
}

// hgSafe is the allow-list of hgrc settings that name no program, load
// no code and no other file (Mercurial 6.3 configitems.py and the
// commands that read them): everything else is refused when it is added
// or changed.
func hgSafe(section, key, value string) bool {
	switch section {
	case "diff", "color", "commands", "command-templates", "templates", "templatealias", "revsetalias",
		"bookmarks", "progress", "worker", "rewrite", "format":
		return true
	case "phases":
		return key == "publish" || key == "new-commit" || key == "checksubrepos"
	case "merge":
		switch key {
		case "checkunknown", "checkignored", "followcopies", "preferancestor", "on-failure", "strict-capability-check", "disable-partial-tools":
			return true
		}
	case "ui":
		return hgSafeUI[key]
	case "extensions":
		// Only disabling one: "name = !" or "name = !path".
		return strings.HasPrefix(strings.TrimSpace(value), "!")
	}
	return false
}

var hgSafeUI = setOf("username", "verbose", "quiet", "debug", "traceback", "color", "paginate", "textwidth", "interface",
	"interface.chunkselector", "tweakdefaults", "askusername", "mergemarkers", "relative-paths", "portablefilenames",
	"allowemptycommit", "archivemeta", "statuscopies", "slash", "strict", "timeout", "timeout.warn", "detailed-exit-code",
	"quietbookmarkmove", "promptecho", "report_untrusted", "supportcontact", "ssherrorhint", "clonebundles",
	"clonebundlefallback", "large-file-limit", "message-output", "fallbackencoding", "nontty", "formatted", "commitsubrepos")

// hgRequires is the SettingsRule of .hg/requires and .hg/store/requires:
// "shared" and "relshared" make hg take the store, and with share-safe
// the hgrc, of the repository .hg/sharedpath names.
func hgRequires(b []byte, _ SettingsEnv) ([]Setting, error) {
	var out []Setting
	for _, line := range strings.Split(string(b), "\n") {
		switch r := strings.TrimSpace(line); r {
		case "shared", "relshared":
			out = append(out, Setting{Key: r, Value: r, Why: "hg takes the repository, and its hgrc, from .hg/sharedpath"})
		}
	}
	return out, nil
}
