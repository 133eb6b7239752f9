package detect

// Refused is one class of calls the command made that the sandbox refuses
// by design (seccomp's refusal classes: netlink, raw and packet sockets,
// new namespaces, ptrace, mounts). It is not a boundary: no policy, grant
// or reviewer can allow it, so it is never reviewed, retried or counted
// by the circuit breaker; it is reported so the person learns why a tool
// said only "Permission denied".
type Refused struct {
	// Class names the class: netlink, raw_socket, namespace, ptrace or
	// mount.
	Class string `json:"class"`
	// What is what was refused, with the tools that commonly ask for it.
	What string `json:"what"`
	// Why says why the sandbox refuses it.
	Why string `json:"why"`
	// Count is how many calls of the class were refused.
	Count int `json:"count"`
	// Probed: programs try this class routinely and carry on without it
	// (seccomp.Refusal).
	Probed bool `json:"-"`
}
