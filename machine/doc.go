// Package machine owns the machine configuration of sandboxd's daemon
// (/etc/sandboxd/sandboxd.toml, `sandboxd serve --config`): who may
// connect ([access]), the machine policy every caller's own policy and
// workspace policies may only tighten ([policy], merged by
// policy.UnderMachine), the model reviewers the operator sets for the
// machine and for single users with keys only root may read
// ([review]), and the limits on each caller ([limits]).
//
// The daemon reads it once, as root, at its start: the file and each
// key file must be root's, in directories only root may write. Its
// errors are *policy.Error, FILE:LINE: KEY: MESSAGE, as a policy's. A
// key is held in Reviewer.Key, for the model endpoint's Authorization
// header only; Reviewer's String and LogValue leave it out.
//
// Of sandboxd's packages it imports only policy.
package machine
