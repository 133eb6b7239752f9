// Package metrics is the daemon's Prometheus face: its metrics on a
// registry of its own (never the process's global one), fed by the
// broker's auditor hook (every decision, grant event and breaker trip),
// by each exec's report, and by the model reviewer's calls, and served
// by the daemon on a loopback address of its own (--metrics-addr).
//
// Every label takes its values from a fixed set (a surface, a decision,
// a source, a grant event, an outcome, a fault class, a direction):
// never a path, host, command, uid or session, so the number of series
// is bounded whatever the callers do. Embedded runs keep no metrics.
//
// Of sandboxd's packages it imports only boundary, broker, review and
// session.
package metrics
