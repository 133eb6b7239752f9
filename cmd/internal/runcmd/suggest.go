package runcmd

import (
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/session"
	"github.com/sandboxd/sandboxd/suggest"
	"github.com/sandboxd/sandboxd/termfilter"
	"golang.org/x/sys/unix"
)

// suggestOnTerminal shows the person at sandboxd's terminal, once the
// run is over, the rules that would allow what was denied: on /dev/tty,
// never on stderr, which the agent reads and could copy into the policy
// with its own tools. Without a terminal it shows nothing.
func suggestOnTerminal(rep *session.Report, policyFile string) {
	text := suggestionText(rep, policyFile)
	if text == "" {
		return
	}
	fd, err := unix.Open("/dev/tty", unix.O_WRONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	unix.Write(fd, []byte(text))
}

// suggestionText is the report's suggested rules as one TOML block for
// policyFile, framed as sandboxd's own and with the terminal's line
// ends; "" when no rule is suggested.
func suggestionText(rep *session.Report, policyFile string) string {
	var rules []string
	for _, b := range rep.Boundaries {
		if s := b.Suggestion; s != nil && s.Rule != "" && !slices.Contains(rules, s.Rule) {
			rules = append(rules, s.Rule)
		}
	}
	if len(rules) == 0 {
		return ""
	}
	return "\r\n" + termfilter.FrameOn + "---- sandboxd: rules that would allow what was denied, next time ----" + termfilter.FrameOff + "\r\n" +
		strings.ReplaceAll(suggest.TOML(policyFile, rules), "\n", "\r\n")
}
