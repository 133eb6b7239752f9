// Package stats holds the order statistics the benchmarks report.
// Of sandboxd's packages it imports none.
package stats
