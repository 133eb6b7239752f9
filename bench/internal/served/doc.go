// Package served starts a sandboxd daemon of a benchmark's own and reads
// what it tells about itself: its CPU time, from /proc, and its pool of
// helpers started in advance, from its metrics. Of sandboxd's packages
// it imports only bench/internal/scratch.
package served
