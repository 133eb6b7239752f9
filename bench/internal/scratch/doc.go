// Package scratch makes the benchmarks' throw-away workspaces.
// Of sandboxd's packages it imports none.
package scratch
