// Package proctree reads process trees from /proc, for tests and
// benchmarks that count what a process left behind or weigh what it
// holds: the processes below one, and their resident memory.
//
// Of sandboxd's packages it imports none.
package proctree
