// Package audit keeps sandboxd's audit log: append-only records, one
// JSON object a line, hash-chained and anchored by Ed25519 checkpoints,
// and the one verifier for it. It stores the Events it is given and
// knows nothing of brokers or sandboxes; the same format and verifier
// serve the daemon's machine log and an embedded run's log in the
// caller's state directory.
//
// # The format
//
// A directory holds the live file audit.jsonl, rotated files
// audit-<first seq, 20 digits>.jsonl (their names sort in chain order),
// the public key audit.pub (PKIX PEM, 0644), the signed head audit.head
// (0644) and the writers' lock audit.lock. Each line is at most MaxLine
// bytes, json.Marshal's encoding of a Record, its fields in this order:
//
//	seq            the record's number; the genesis is 0, each line is one more
//	prev           hex SHA-256 of the previous line's bytes, without its newline
//	               (64 zeros for the genesis)
//	hash           only in a view's stub: the hash of the line it stands for
//	time           RFC 3339, UTC
//	kind           decision, grant_issued, grant_consumed, grant_rejected,
//	               grant_expired, review_fault, override, break_glass, answer,
//	               breaker_tripped, lost_detections, daemon_start, daemon_stop,
//	               or the log's own: genesis, checkpoint, retention
//	uid session agent command cwd surface operation target request_hash
//	outcome source risk authorization rationale production model_outcome
//	model_risk answer_source review_ms expires_at why count note
//	               the event (Event), each left out when empty
//	genesis        {"chain": random id, "key": hex SHA-256 of the public key}
//	checkpoint     {"chain", "sig": base64 Ed25519 over the chain id, seq, prev
//	               and time (checkpointMessage)}
//	retention      {"chain", "files", "first_seq", "last_seq", "last_hash"}
//
// A field too long for the line is cut by Append and ends in "…[cut]";
// Append never fails for length. A reader (Scan) accepts a line only in
// exactly the form Append writes it, so one meaning has one spelling.
//
// # Checkpoints and the head
//
// A writer signs the chain (a checkpoint record) after every record
// whose seq is a multiple of CheckpointEvery (so at most that many
// records are ever unsigned), at rotation, at Close, and
// CheckpointAfter after it wrote an unsigned record, by a timer of its
// own; a writer also signs a tail that another writer left unsigned for
// longer than that (that writer died) before it appends. After each
// checkpoint it syncs the file and then replaces audit.head, which
// names (signed) the checkpoint's seq and line hash: a verifier that
// finds the log ending before that checkpoint, or another record there,
// reports records cut from the end.
//
// # What the chain detects, and what it cannot
//
// Verify names the first record at which any of these shows: a byte
// edited, a record deleted, inserted or reordered, a line cut short,
// records cut from the end up to the head's checkpoint, a rotated file
// missing (one that retention removed is accounted for by its
// retention record), a file of another chain in the set, a checkpoint
// not signed by the published key, a head naming a checkpoint that is
// not there. It cannot detect: records after the last checkpoint cut
// away together with the head rolled back to an older copy, by someone
// who can write the log's files (they can also append records that the
// next checkpoint then signs); nor anything the holder of the private
// key does, who can rewrite the whole log and sign it anew. For the
// daemon's machine log that holder is root; for an embedded run's log
// it is the user, so that log proves nothing against its own user.
//
// # Concurrent writers
//
// Several processes (embedded runs of one user) and many goroutines (the
// daemon's execs) append to one chain. Each append takes a process-wide
// mutex, then an exclusive flock on audit.lock, then reads the chain's
// last line from the file (never a seq it remembers), writes its line
// at the end and releases the lock. A writer whose live file was
// rotated by another reopens it. A failed or short write is cut back
// before the lock is released; a line a crashed writer left cut short
// is removed by the next writer, so no partial line ever breaks the
// chain for the writers after it.
//
// A view (View) replaces the records a reader may not see with stubs
// {"seq","prev","hash"}: Verify accepts it, so a user checks the records
// about them in the machine log without seeing another user's. A stub's
// hash is taken on the server's word, and the server holds the key.
//
// Of sandboxd's packages it imports only atomicfile. It must never
// import sandbox/..., landlock, seccomp, kernelaudit, netproxy,
// review/..., session or openai-go.
package audit
