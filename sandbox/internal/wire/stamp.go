package wire

// stamp is this build's stamp: one fresh value per build that the
// Makefile and the integration harness link into both sandboxd and
// sandboxd-helper (-ldflags "-X ...wire.stamp=VALUE"), so that a helper
// can tell whether the sandboxd that started it is of its own build. It
// is "" in a build without one (go build, go run, test binaries), which
// never runs a separate helper: it re-executes itself. A variable only
// because the linker sets it; nothing assigns it.
var stamp string

// Stamp is this build's stamp, "" when unstamped.
func Stamp() string { return stamp }

// Skew is the sentence a helper reports when the sandboxd that started
// it is of another build (SetupMsg.Stamp is not its own): it ran nothing.
// It travels as Message.Why of an Error with code 125; those fields and
// SetupMsg.Stamp keep their names and meaning in every build, since they
// are how two builds that may disagree on everything else say so.
const Skew = "the sandbox helper (sandboxd-helper) does not belong to this sandboxd: they come from different builds; install both again from one build (make build installs both into bin/)"
