// Package ruletext is the one home of a boundary rule's text: how a rule
// line ("fs write_file /etc/hosts") splits into its fields, and the path
// patterns of filesystem rules — their wildcards, their escapes, "~", how
// a pattern matches a path, and the one name a pattern without wildcards
// names.
//
// A backslash takes the next character literally, both when a line is
// split (so "\ " is a space inside a field, not between fields) and when
// a pattern matches (so "\*" is a star, not a wildcard). Escape is the
// inverse: it spells a name so that, as a pattern, it matches exactly that
// name. The broker parses and matches rules with it; the policy checks
// them with it; a suggested rule is written with it, quoted as TOML as
// an agent's config.toml is too (TOMLString).
//
// Of sandboxd's packages it imports none.
package ruletext
