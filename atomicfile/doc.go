// Package atomicfile replaces a file's contents all at once: a reader (or
// the next run, after a crash) sees the old contents or the new, never a
// mix or a truncated file. It writes a temporary file beside the target,
// in the same directory so the rename stays on one file system, and
// renames it over the target.
//
// Two strengths, chosen by the caller:
//
//   - WriteFile is atomic against a crash of the process (SIGKILL, a
//     panic, an OOM kill): nothing is synced, so after a power loss or a
//     kernel crash the target may hold the old contents, or, on some file
//     systems, be empty.
//   - WriteFileSync is also durable: the temporary file is fsynced before
//     the rename and the directory after it, so once it returns the new
//     contents survive a power loss.
//
// Which sandboxd's files need which:
//
//   - the layer's commit journal (layer/journal.go): WriteFile. Its
//     contract is a commit that is atomic against a crash of sandboxd,
//     which the crash tests exercise; syncing the journal alone would not
//     make it durable against a power loss (the staged files it points to
//     and the workspace's directories are not synced either), and a
//     replayed journal whose staged files lost their data would be worse
//     than a lost one. Durability there is a change to the whole commit.
//   - kernelaudit's holder state (kernelaudit/holder.go): WriteFile. It lives in
//     /run, a tmpfs, and records kernel settings that a reboot resets
//     anyway: it must outlive a crash of sandboxd, not of the machine.
//   - the broker's circuit-breaker state (broker/breaker.go): WriteFile. A
//     torn file fails closed (locked); a power loss can forget the last
//     decisions.
//   - persist's remembered scan (persist/scan.go): WriteFile. It is a
//     cache: a lost or torn one costs a full scan.
//   - sandbox's compiled seccomp filter cache: WriteFileSync (it fsyncs
//     today: a filter half written before a power loss must never load).
//
// The new file gets perm less the umask, as os.WriteFile gives a new file,
// and is owned by the caller; the target's old mode and owner are not
// kept. The temporary file is named .BASE.tmp-RANDOM beside the target and
// is removed on every error; only a crash between its creation and the
// rename leaves it behind, and RemoveLeftovers removes such files.
//
// Of sandboxd's packages it imports none, so every package may use it.
package atomicfile
