package suggest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/termfilter"
)

// Text is what a person reads about a report's boundaries: one TOML
// block with every rule offered (each once) for policyFile, then, as
// comments, each denied boundary no rule is offered for and why. The
// whole text is valid TOML and safe to show on a terminal: every name in
// a comment is escaped (termfilter.Escape), every rule quoted.
func Text(bs []Boundary, home, policyFile string, before BeforeAllow) string {
	var rules, none []string
	denied := false
	for _, b := range bs {
		if b.Decision != broker.Deny {
			continue
		}
		denied = true
		s := For(b, home, policyFile, before)
		if s.Rule != "" {
			if !slices.Contains(rules, s.Rule) {
				rules = append(rules, s.Rule)
			}
			continue
		}
		line := fmt.Sprintf("#   %s %s: %s\n", termfilter.Escape(string(b.Operation)), termfilter.Escape(b.target()), termfilter.Escape(s.Why))
		if !slices.Contains(none, line) {
			none = append(none, line)
		}
	}
	var out strings.Builder
	switch {
	case len(rules) > 0:
		out.WriteString(TOML(policyFile, rules))
	case denied:
		fmt.Fprintf(&out, "# Your policy file: %s\n# No rule can allow what was denied.\n", termfilter.Escape(policyFile))
	default:
		fmt.Fprintf(&out, "# Your policy file: %s\n# Nothing was denied.\n", termfilter.Escape(policyFile))
	}
	if len(none) > 0 {
		out.WriteString("\n# No rule is offered for:\n")
		out.WriteString(strings.Join(none, ""))
	}
	return out.String()
}
