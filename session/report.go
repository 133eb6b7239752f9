package session

import (
	"github.com/sandboxd/sandboxd/boundary"
	"github.com/sandboxd/sandboxd/broker"
	"github.com/sandboxd/sandboxd/layer"
	"github.com/sandboxd/sandboxd/sandbox"
	"github.com/sandboxd/sandboxd/suggest"
)

// Report is the --report JSON (docs/ARCHITECTURE.md §3.3): one object per run.
type Report struct {
	ExitCode    int                 `json:"exit_code"`
	Attempts    int                 `json:"attempts"`
	LandlockABI int                 `json:"landlock_abi"`
	NetworkMode string              `json:"network_mode"`
	Isolation   string              `json:"isolation"`
	Boundaries  []Boundary          `json:"boundaries"`
	Detection   *sandbox.Detection  `json:"detection,omitempty"`
	Degraded    []string            `json:"degraded,omitempty"`
	Containment string              `json:"containment,omitempty"`
	TimedOut    bool                `json:"timed_out,omitempty"`
	Signal      int                 `json:"signal,omitempty"`
	Persistence []sandbox.Persisted `json:"persistence,omitempty"`
	// Limits are the limits the final attempt ran into.
	Limits []sandbox.LimitHit `json:"limits,omitempty"`
	// Quiet counts the writes to tools' own state the quiet list denied
	// without review (not boundaries), by entry.
	Quiet       []Quiet      `json:"quiet,omitempty"`
	Transaction *Transaction `json:"transaction,omitempty"`
	// Caches lists the private tool caches and which showed the host's
	// own cache read-only beneath them (and why one did not).
	Caches []sandbox.CacheResult `json:"caches,omitempty"`
	// Watched reports that the command watched files (inotify) behind
	// the copy-on-write layer, and was told what that means.
	Watched bool `json:"watched,omitempty"`
	// Refused lists, by class, the calls the sandbox refuses by design
	// that the command made (netlink, raw sockets, new namespaces,
	// ptrace, mounts), counted over the attempts: not boundaries, since
	// nothing can grant one.
	Refused []sandbox.Refused `json:"refused,omitempty"`
	// CredentialScan says which part of the home the scan for
	// credential stores by name did not reach, if any.
	CredentialScan string `json:"credential_scan,omitempty"`
	Session        string `json:"session,omitempty"`
	Workspace      string `json:"workspace,omitempty"`
	// WorkspaceFrom says how the workspace was chosen: "--workspace",
	// "git" (the repository's top level above the working directory),
	// ".sandboxd.toml" (that file's directory) or "cwd".
	WorkspaceFrom string `json:"workspace_from,omitempty"`
	// WorkspaceNote says why a root found above the working directory
	// was not taken.
	WorkspaceNote string   `json:"workspace_note,omitempty"`
	Command       []string `json:"command,omitempty"`
	SetupMS       float64  `json:"setup_ms,omitempty"`
	Egress        *Egress  `json:"egress,omitempty"`
	// Retry, when the front end drives the retry (Job.Hold), holds the
	// grants an attempt waits on (held.go).
	Retry *Retry `json:"retry,omitempty"`
	// Reviewer says who could review the run's boundaries.
	Reviewer *ReviewerInfo `json:"reviewer,omitempty"`
	// AuditFailures counts the records the audit log could not take in
	// this run: each allow among them was denied (source error).
	AuditFailures int `json:"audit_failures,omitempty"`
	// Error is the public sentence for a run sandboxd itself failed
	// (exit status 125).
	Error string `json:"error,omitempty"`
}

// Boundary is one entry of the report's boundaries.
type Boundary struct {
	Attempt     int                `json:"attempt"`
	Surface     boundary.Surface   `json:"surface"`
	Operation   boundary.Operation `json:"operation"`
	Path        string             `json:"path,omitempty"`
	Destination string             `json:"destination,omitempty"`
	Decision    broker.Outcome     `json:"decision"`
	Source      broker.Source      `json:"source"`
	Rationale   string             `json:"rationale,omitempty"`
	// Production is the production marker the target matches (the
	// decision was critical before anyone was asked; Rationale says
	// which name matched), or empty.
	Production string `json:"production,omitempty"`
	// Grant is what became of the allow's grant: issued, consumed,
	// expired or rejected.
	Grant string `json:"grant,omitempty"`
	// Held marks a boundary decided while the attempt ran (a connection
	// the proxy held): it neither triggers nor blocks a retry.
	Held bool `json:"held,omitempty"`
	// Addresses are what a network destination resolved to (or its
	// literal): the addresses that were checked and dialled.
	Addresses []string `json:"addresses,omitempty"`
	// Connections counts the connections a network allow carried.
	Connections int `json:"connections,omitempty"`
	// Suggestion, for a denial, is the rule a person could add to their
	// own policy to allow it next time, or why none is offered (see
	// suggest). It is for the person: set when the run ends, in the report
	// file and on the person's terminal, never in an event or on the
	// command's stderr.
	Suggestion *suggest.Suggestion `json:"suggestion,omitempty"`
	// pending marks a network boundary whose decision has not come yet
	// (its connection waits, or gave up waiting).
	pending bool
}

// Egress is the report's "egress" object: how the command could reach
// the network, and what its proxy saw.
type Egress struct {
	// Mode is "proxy" or "none" (Why says why).
	Mode string `json:"mode"`
	Why  string `json:"why,omitempty"`
	// Capture is "on" when connects straight to an address went through
	// the proxy's decision (the stub resolver answered names inside), or
	// "off" with CaptureWhy when they were refused (network.capture =
	// false, or it could not be installed).
	Capture    string `json:"capture,omitempty"`
	CaptureWhy string `json:"capture_why,omitempty"`
	// Scope is the grant scope: "run" or "connection".
	Scope string `json:"grant_scope,omitempty"`
	// Connections counts client connections by "decision/source".
	Connections map[string]int64 `json:"connections,omitempty"`
	// ByVia counts the connections decided for a destination by
	// "decision/via" (http, connect, socks, capture, capture-http).
	ByVia     map[string]int64 `json:"by_via,omitempty"`
	BytesUp   int64            `json:"bytes_up"`
	BytesDown int64            `json:"bytes_down"`
	// Allowed are the destinations the policy allowed: nothing was
	// refused or reviewed, so none is a boundary.
	Allowed []AllowedDest `json:"allowed,omitempty"`
	// Reviews counts the destinations a reviewer (the model or a person)
	// answered, and ReviewWait how long their connections waited for it;
	// what the policy, a hard deny or the lack of a reviewer decided is
	// no review.
	Reviews    int64   `json:"reviews"`
	ReviewWait float64 `json:"review_wait_ms"`
	// DNSAnswers counts the queries the stub resolver answered.
	DNSAnswers int64 `json:"dns_answers"`
}

// AllowedDest is a destination the policy allowed, and what it carried.
type AllowedDest struct {
	Destination string   `json:"destination"`
	Addresses   []string `json:"addresses,omitempty"`
	Connections int      `json:"connections"`
}

// Transaction is the report's "transaction" object.
type Transaction struct {
	// Mode is "layer" (writes held in a copy-on-write layer, the final
	// attempt's committed) or "none" (written straight through).
	Mode string `json:"mode"`
	Why  string `json:"why,omitempty"`
	// PersistenceGuard says when the persistence rules judged what the
	// command left: "commit" (before anything reached the workspace) or
	// "sweep" (after the command exited: see Exposed).
	PersistenceGuard string `json:"persistence_guard,omitempty"`
	// Exposed, with a sweep, says what the weaker mode cannot do: a
	// protected name that did not exist when the run started could be
	// created and used by a program on the host before the sweep took it
	// away.
	Exposed   string `json:"exposed,omitempty"`
	LayerSize int64  `json:"layer_size,omitempty"`
	// Discarded counts attempts whose layer was dropped for a retry.
	Discarded int               `json:"discarded_attempts"`
	Committed *layer.Outcome    `json:"committed,omitempty"`
	Recovered []layer.Recovered `json:"recovered,omitempty"`
}

// Quiet is one quiet-list entry's denials in a run.
type Quiet struct {
	Why   string `json:"why"`
	Count int    `json:"count"`
	// Paths are the distinct paths denied (at most maxQuietPaths).
	Paths []string `json:"paths"`
}

// maxQuietPaths bounds the paths a Quiet entry lists.
const maxQuietPaths = 20
