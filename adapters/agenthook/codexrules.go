package agenthook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Codex judges its rules (execpolicy, $CODEX_HOME/rules/*.rules) after
// its PreToolUse hooks, against the command a hook rewrote to: once the
// hook runs every command under sandboxd run, none of the person's
// rules would match. So the hook judges the command as the person wrote
// it first, with Codex's own evaluator (codex execpolicy check), and
// blocks what a rule forbids or would have asked about.

// maxRuleChecks bounds the commands of one script judged against the
// rules; a longer script is refused rather than judged in part.
const maxRuleChecks = 64

// RuleVerdict is the strictest decision the rules made about a script.
type RuleVerdict struct {
	// Decision is "forbidden", "prompt", "allow" or "" (no rule matched).
	Decision string
	// Command is the command the decision is about; Justification the
	// rule's own words, if it has any.
	Command, Justification string
}

// CheckCodexRules judges each command of script against the rule files
// with codex, the real Codex binary. An error means the rules could not
// be judged: the caller blocks.
// It runs in dir with env, the caller's.
func CheckCodexRules(ctx context.Context, codex string, rules []string, script, dir string, env []string) (RuleVerdict, error) {
	cmds := Commands(script)
	if len(cmds) > maxRuleChecks {
		return RuleVerdict{}, fmt.Errorf("the command holds more than %d commands to judge against your Codex rules", maxRuleChecks)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	verdicts := make([]RuleVerdict, len(cmds))
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, argv := range cmds {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			verdicts[i], errs[i] = checkOne(ctx, codex, rules, argv, dir, env)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return RuleVerdict{}, err
	}
	var worst RuleVerdict
	for _, v := range verdicts {
		if rank(v.Decision) > rank(worst.Decision) {
			worst = v
		}
	}
	return worst, nil
}

func rank(d string) int {
	switch d {
	case "forbidden":
		return 3
	case "prompt":
		return 2
	case "allow":
		return 1
	}
	return 0
}

// checkOne runs codex execpolicy check for one command.
func checkOne(ctx context.Context, codex string, rules, argv []string, dir string, env []string) (RuleVerdict, error) {
	args := []string{"execpolicy", "check", "--resolve-host-executables"}
	for _, r := range rules {
		args = append(args, "--rules", r)
	}
	args = append(append(args, "--"), argv...)
	cmd := exec.CommandContext(ctx, codex, args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return RuleVerdict{}, fmt.Errorf("codex could not judge %q against your rules: %w: %s", strings.Join(argv, " "), err, clip(strings.TrimSpace(stderr.String())))
	}
	var res struct {
		Decision string `json:"decision"`
		Matched  []struct {
			Prefix struct {
				Decision      string `json:"decision"`
				Justification string `json:"justification"`
			} `json:"prefixRuleMatch"`
		} `json:"matchedRules"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return RuleVerdict{}, fmt.Errorf("codex execpolicy check gave output sandboxd cannot read: %w", err)
	}
	if rank(res.Decision) == 0 && res.Decision != "" {
		return RuleVerdict{}, fmt.Errorf("codex execpolicy check gave the unknown decision %q", clip(res.Decision))
	}
	v := RuleVerdict{Decision: res.Decision, Command: strings.Join(argv, " ")}
	for _, m := range res.Matched {
		if m.Prefix.Decision == res.Decision && m.Prefix.Justification != "" {
			v.Justification = m.Prefix.Justification
		}
	}
	return v, nil
}

// Commands are the simple commands of a shell script as a rule sees
// them: the words before anything a rule cannot read (an expansion, a
// redirection, a glob), in every part the script's operators (; & && ||
// | newline), subshells and substitutions separate, leading variable
// assignments skipped. Codex itself reads only scripts made of plain
// words and those operators; this reads those the same way and more
// scripts besides, so that a rule also holds where a script hides its
// command behind FOO=1, (...) or $(...).
func Commands(script string) [][]string {
	var l lexer
	for i := 0; i < len(script); i++ {
		i = l.step(script, i)
	}
	l.endCmd()
	return l.cmds
}

// lexer is Commands' state: the commands so far, the current one's
// words and word, and whether the rest of the command is beyond a rule.
type lexer struct {
	cmds  [][]string
	words []string
	word  strings.Builder
	inW   bool
	stop  bool
}

func (l *lexer) endWord() {
	if l.inW && !l.stop && (len(l.words) > 0 || !isAssignment(l.word.String())) {
		l.words = append(l.words, l.word.String())
	}
	l.word.Reset()
	l.inW = false
}

func (l *lexer) endCmd() {
	l.endWord()
	if len(l.words) > 0 {
		l.cmds = append(l.cmds, l.words)
	}
	l.words, l.stop = nil, false
}

// quoted reads the quoted text from s[i] (a quote) to its closing
// quote, and returns the index of that quote; a double-quoted text
// that expands anything ends what a rule can read.
func (l *lexer) quoted(s string, i int) int {
	j := strings.IndexByte(s[i+1:], s[i])
	if j < 0 {
		l.stop = true
		return len(s)
	}
	text := s[i+1 : i+1+j]
	if s[i] == '"' && strings.ContainsAny(text, "$`\\") {
		l.endWord()
		l.stop = true
	} else {
		l.word.WriteString(text)
		l.inW = true
	}
	return i + 1 + j
}

// step reads s[i] and returns the index of the last byte it used.
func (l *lexer) step(s string, i int) int {
	c := s[i]
	switch {
	case c == ' ' || c == '\t':
		l.endWord()
	case strings.IndexByte("\n;&|()`{}", c) >= 0:
		l.endCmd()
	case c == '$' && i+1 < len(s) && s[i+1] == '(':
		l.endCmd()
		return i + 1
	case c == '\'' || c == '"':
		return l.quoted(s, i)
	case c == '\\' && i+1 < len(s) && s[i+1] != '\n':
		l.word.WriteByte(s[i+1])
		l.inW = true
		return i + 1
	case c == '#' && !l.inW:
		// A comment, to the end of the line.
		l.endCmd()
		if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
			return i + j
		}
		return len(s)
	case strings.IndexByte("$<>*?[~", c) >= 0:
		l.endWord()
		l.stop = true
	default:
		l.word.WriteByte(c)
		l.inW = true
	}
	return i
}

// isAssignment: NAME=value, a variable set for the command.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, c := range name {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
