package wire

// The helper's own Landlock rules in a run with namespaces: what it
// grants on the mounts it makes itself, besides the supervisor's ruleset
// (the carve-out, the writable roots, the granted objects) and the rules
// it adds for what the run names (the workspace's layer, the caches, the
// shown files). One list: the helper installs it, and the supervisor
// tells the judge of observed calls by it.

// OwnRoots are the helper's mounts that get every right: the private
// /tmp (also bound on /var/tmp), /dev/shm and devpts.
func OwnRoots() []string { return []string{"/tmp", "/dev/shm", "/dev/pts"} }

// DevNodes are the host device nodes bound into the private /dev, by
// name: read, write and ioctl.
func DevNodes() []string { return []string{"null", "zero", "full", "random", "urandom", "tty"} }

// OwnReadable are the helper's private /proc and /dev, which get the
// read rights (their host mountpoints are carved separately).
func OwnReadable() []string { return []string{"/proc", "/dev"} }

// HostDevNodes are the host's device nodes a run without namespaces may
// write (and ioctl), by name: the sinks and sources every shell script
// uses (`> /dev/null`). Not the terminal, which is the host's own there,
// nor the random devices, which the read carve-out already covers.
func HostDevNodes() []string { return []string{"null", "zero", "full"} }
