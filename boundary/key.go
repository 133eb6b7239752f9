package boundary

// Key is what makes two boundaries the same one: the same access
// (surface and operation) to the same object (the path as the command
// named it, or the destination's text). Everything else (which attempt,
// which object now sits at the path, who called) is another sighting of
// it. The sandbox merges a run's denials by it, and a session counts a
// boundary once per run by it (the circuit breaker's "distinct
// boundary"). It is comparable: a map key.
type Key struct {
	Surface     Surface
	Operation   Operation
	Path        string
	Destination string
}
