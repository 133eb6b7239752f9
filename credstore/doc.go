// Package credstore says which files in a caller's home are credential
// stores, by class: the stores well-known tools document (stores.go,
// one entry per store with the tool and its documentation), at every
// place the caller's environment moves them (XDG base directories,
// each tool's own variable) and at their defaults; and, for the long
// tail, files named as credentials, tokens, auth files, private keys,
// password and history files, keyrings and wallets are (names.go), found
// by a scan of the home and the XDG directories (scan.go) that skips
// version-controlled work trees and dependency trees and keeps an index
// so a launch rereads only the directories that changed.
//
// It also says where cloud and cluster tools keep the configuration
// that names the account or cluster a command acts on (clusters.go, the
// same form as the stores), whose names the broker matches against the
// production markers.
//
// It decides nothing and enforces nothing: policy turns the stores into
// secret entries and session adds what the scan finds; the sandbox
// carves them out of what the command may read. Of sandboxd's packages
// it imports only atomicfile, filecache, pathtree and publicerr. It must never import policy,
// session, broker or sandbox.
package credstore
