// Package record turns what the broker does (broker.AuditEvent: a
// decision, a grant issued, consumed, expired or refused, a model
// reviewer's failure, a person's override used, a breaker's trip) and
// a run's lost detections into records of the audit log, for one
// caller: each names the caller's uid, and every text field passes
// through the model reviewer's redactor first, so no secret value,
// token or key reaches the log. A decision's record carries who
// decided, the model's own verdict when a person decided after it, the
// answer's source (person, client), how long the review took and the
// production marker matched.
//
// A Recorder is the broker's Auditor: its error (the log refused the
// record) makes the broker deny what it would have allowed.
//
// Of sandboxd's packages it imports only audit, boundary, broker and
// grants.
package record
